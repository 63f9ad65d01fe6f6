import json
import logging

from shop import catalog


def test_export_catalog(tmp_path):
    out = tmp_path / "catalog.json"
    out.write_text(json.dumps({sku: catalog.CORE[sku] for sku in catalog.CORE}))
    assert json.loads(out.read_text())["tea"] == 450


def test_export_logs(caplog):
    with caplog.at_level(logging.INFO):
        logging.getLogger("shop.export").info("exported %d products", 3)
    assert "exported 3 products" in caplog.text
