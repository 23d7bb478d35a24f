"""A large YAML configuration: libyaml vs the pure-Python parser, same strict checks.

Issue #13 item 10: a 15.6 MB YAML configuration took 18.5 s with the pure
parser. This builds a document of that size within the configuration limits
(16 MiB, at most 10,000 nodes: long string values), loads it through
``load_config_document``'s strict loader with each parser, checks that both
return the same value, and prints each time and the ratio
``pure / libyaml`` (target: at least 5; and libyaml under 2 s).

Usage: python bench/yaml_config.py [--size-mib 15.6] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time

from sealeval.manifest.components import CONFIG_MAX_BYTES
from sealeval.strict_yaml import LIBYAML_AVAILABLE, YamlLimits, load_strict_yaml

TARGET_RATIO = 5.0
TARGET_SECONDS = 2.0


def _document(size: int) -> str:
    entries = 4000
    width = max(1, size // entries - 32)
    lines = [f"key_{index:05d}: value-{'x' * width}-{index}" for index in range(entries)]
    return "\n".join(lines) + "\n"


def _time(text: str, use_libyaml: bool, repeat: int) -> tuple[float, object]:
    best = float("inf")
    value: object = None
    limits = YamlLimits(max_bytes=CONFIG_MAX_BYTES)
    for _ in range(repeat):
        start = time.perf_counter()
        value = load_strict_yaml(text, limits=limits, use_libyaml=use_libyaml)
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=float, default=15.6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not LIBYAML_AVAILABLE:
        print("PyYAML was built without libyaml: nothing to compare")
        return 1
    text = _document(int(args.size_mib * 1_048_576))
    print(f"document: {len(text.encode()) / 1_048_576:.1f} MiB")
    fast, fast_value = _time(text, True, args.repeat)
    pure, pure_value = _time(text, False, 1)
    if fast_value != pure_value:
        print("FAIL: the parsers returned different values")
        return 1
    ratio = pure / fast
    print(f"libyaml: {fast:.2f} s   pure: {pure:.2f} s   ratio: {ratio:.1f}x")
    ok = ratio >= TARGET_RATIO and fast <= TARGET_SECONDS
    print("OK" if ok else f"BELOW TARGET (ratio >= {TARGET_RATIO}, libyaml <= {TARGET_SECONDS} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
