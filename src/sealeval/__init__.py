"""sealeval: trustworthy evaluation results.

Seal what is evaluated, run fail-closed evaluation sessions, gate releases on
pre-registered evidence, and publish signed evidence packs that verify offline.
"""

__version__ = "0.1.0"
