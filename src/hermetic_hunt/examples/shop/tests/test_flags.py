from shop import flags, pricing, settings


def test_enable_beta_pricing():
    flags.enable("beta_pricing")
    assert flags.is_enabled("beta_pricing")


def test_set_region_eu():
    settings.set_region("EU")
    assert settings.REGION == "EU"


def test_price_display_shows_vat_once():
    # Fails only after both tests above ran: beta pricing *in the EU*.
    expected = round(1000 * 1.2) if settings.REGION == "EU" else 1000
    assert pricing.with_vat(1000) == expected
