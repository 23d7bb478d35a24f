"""Synthetic post-processing step for the sealeval demo."""


def post_process(probability: float, threshold: float = 0.62) -> str:
    """Map a probability to a label."""
    return "positive" if probability >= threshold else "negative"
