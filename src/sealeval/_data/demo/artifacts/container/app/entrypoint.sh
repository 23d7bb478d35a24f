#!/bin/sh
exec python -m demo_triage "$@"
