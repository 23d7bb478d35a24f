#!/bin/sh
# SYNTHETIC demo container: nothing runs here.
exec python -m synthetic_summarizer "$@"
