"""SYNTHETIC post-processing step for the sealeval session demo."""


def post_process(text: str) -> str:
    """Strip surrounding whitespace."""
    return text.strip()
