"""Feature flags kept in a module-level dict."""

FLAGS: dict[str, bool] = {"beta_pricing": False}


def enable(name: str) -> None:
    FLAGS[name] = True


def is_enabled(name: str) -> bool:
    return FLAGS.get(name, False)
