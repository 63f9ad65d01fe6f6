"""A tiny shop: catalog, cart, pricing, billing, orders -- and its bugs."""
