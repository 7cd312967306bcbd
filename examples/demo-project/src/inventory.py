"""Stock levels for a tiny shop."""

STOCK = {"apples": 12, "pears": 0}


def in_stock(item: str) -> bool:
    return STOCK.get(item, 0) > 0
