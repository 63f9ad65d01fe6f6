from shop import ledger


def test_ledger_starts_empty(ledger_file):
    # Fails after test_record_sale: the session fixture's file is shared.
    assert ledger.entries(ledger_file) == []


def test_record_sale(ledger_file):
    ledger.record(ledger_file, "tea", 450)
    assert ledger.entries(ledger_file)[-1] == {"sku": "tea", "cents": 450}


def test_ledger_totals_one_sale(ledger_file):
    # Brittle: needs test_record_sale to have run in this session.
    assert sum(e["cents"] for e in ledger.entries(ledger_file)) == 450


def test_fresh_ledger_is_a_list(tmp_path):
    path = tmp_path / "other.json"
    path.write_text("[]")
    assert ledger.entries(path) == []
