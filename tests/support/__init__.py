"""Shared, importable helpers of the test suite (never tests themselves).

Fixtures are registered in ``tests/conftest.py``, the suite's one entry point;
what a test needs at import time (parametrize tables, vector cases, the canary
constant) lives here, one module per job:

* ``support.refusals``: the canary and ``assert_refused``;
* ``support.vectors``: golden-vector loading and the reference input conventions
  (``pack_folder``: a pack case's folder, never ``packs/<name>``);
* ``support.digests``: the neutral artifact, configuration and tokenizer digests;
* ``support.scripts``: a script of ``scripts/`` loaded as a module (``load_script``);
* ``support.postgres``: the throwaway PostgreSQL cluster behind the ``postgres_dsn`` fixture;
* ``support.browser``: headless Chromium (the HTML report and viewer tests);
* ``support.integration_samples`` and ``support.view_workspace``: evaluator
  samples and packs for the integration and view tests;
* ``support.<family>_<subject>``: helpers and tables shared by several test
  modules of one subject (no test module imports another test module).
"""
