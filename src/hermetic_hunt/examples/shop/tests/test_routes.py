from shop import routes


class TestRoutes:
    # Built once, in the class body, and shared by every test of the class.
    graph = routes.build()

    def test_hub_has_two_routes(self):
        # Fails after test_open_east_route (it mutates the class attribute).
        assert len(self.graph["hub"]) == 2

    def test_open_east_route(self):
        self.graph["hub"].append("east")
        assert "east" in self.graph["hub"]

    def test_east_route_is_open(self):
        # Brittle: only passes after test_open_east_route.
        assert "east" in self.graph["hub"]

    def test_north_leads_back_to_hub(self):
        assert self.graph["north"] == ["hub"]
