"""``ragas-result-csv``: ragas ``EvaluationResult.to_pandas().to_csv()`` files.

The shared sample (``../shared/samples/evaluators/ragas``) and real files users
committed (``tests/fixtures/real/ragas``) import; the CSV gives the same
records as its JSON-lines twin; pandas' layouts (index column, CRLF,
multi-line quoted cells, empty cells for NaN, a UTF-8 byte order mark) are
read; every refusal rule has a case asserting its closed code and field, with
the canary in the file never echoed.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval.captured import make_run
from sealeval.captured.importers import ImportRefusalError, detect_adapter, load_run
from sealeval.captured.importers.base import DETECT_BYTES, ImportOptions
from sealeval.captured.importers.native import NATIVE_IMPORTERS, ragas_csv
from sealeval.captured.run import Record
from sealeval.cli.imports import import_command
from support.refusals import CANARY, assert_refused
from support.vectors import samples_dir

SAMPLES = samples_dir()
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "ragas"
CSV_SAMPLE = SAMPLES / "ragas/evaluation_result.csv"
TWIN = SAMPLES / "ragas/evaluation_result.records.jsonl"
DIGEST = "sha256:" + "0" * 64
IMPORTER = next(importer for importer in NATIVE_IMPORTERS if importer.name == "ragas-result-csv")
HEADER = ["user_input", "retrieved_contexts", "response", "reference", "faithfulness"]


def records(path: Path, **options: Any) -> list[Record]:
    """Import ``path`` with the CSV reader; check the records form a valid run."""
    found = [Record.from_mapping(row) for row in IMPORTER.records(path, ImportOptions(**options))]
    make_run(found, source={"name": "ragas", "version": "0.2"}, run_id="r", artifact_digest=DIGEST)
    return found


def write_csv(path: Path, rows: list[list[str]], *, terminator: str = "\n") -> Path:
    """Write rows as pandas ``to_csv`` does (minimal quoting)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=terminator).writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    return path


def facts(record: Record) -> tuple[Any, ...]:
    return record.id, record.input, record.expected, record.output, dict(record.scores)


# ---------------------------------------------------------------------------
# Real files


def test_sample_csv_gives_the_records_of_its_jsonl_twin() -> None:
    from_csv = records(CSV_SAMPLE)
    twin = [json.loads(line) for line in TWIN.read_text(encoding="utf-8").splitlines() if line]
    assert len(from_csv) == len(twin) == 3
    metrics = set(twin[0]) - {"user_input", "response", "reference", "retrieved_contexts"}
    for position, (record, row) in enumerate(zip(from_csv, twin, strict=True)):
        assert record.id == str(position)
        assert (record.input, record.expected, record.output) == (
            row["user_input"],
            row["reference"],
            row["response"],
        )
        assert dict(record.scores) == {name: row[name] for name in metrics}
        assert record.error is None
    # the same scores as the JSON-lines reader gives its twin
    twin_records = list(
        next(i for i in NATIVE_IMPORTERS if i.name == "ragas-result-rows").records(
            TWIN, ImportOptions()
        )
    )
    assert [facts(r) for r in from_csv] == [facts(r) for r in twin_records]


def test_auto_picks_the_csv_reader_and_leaves_other_csv_files() -> None:
    assert detect_adapter(CSV_SAMPLE) == "ragas-result-csv"
    for path in sorted(REAL.glob("*.csv")):
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header = next(csv.reader(handle))
        if "user_input" in header:
            assert detect_adapter(path) == "ragas-result-csv", path.name
    for other in (SAMPLES / "promptfoo/results.csv", SAMPLES / "ragas/evaluation_dataset.jsonl"):
        assert_refused(lambda other=other: detect_adapter(other), "unknown_format", "adapter")
    # the JSON-lines twin stays with its own reader
    assert not IMPORTER.detect(TWIN.read_bytes()[:DETECT_BYTES], TWIN)


def test_real_file_keeps_retrieved_contexts_as_text() -> None:
    path = REAL / "tommaso-lippolis.ragas_results.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    found = records(path)
    assert len(found) == len(rows)
    for record, row in zip(found, rows, strict=True):
        context = record.to_dict()["context"]["upstream_record"]
        assert context["retrieved_contexts"] == row["retrieved_contexts"]
        assert isinstance(context["retrieved_contexts"], str)
        assert record.input == row["user_input"]
        assert dict(record.scores) == {
            name: float(row[name])
            for name in ("context_precision", "context_recall", "faithfulness", "answer_relevancy")
            if row[name] != ""
        }


def test_empty_cells_are_missing_scores_in_a_real_file() -> None:
    path = REAL / "tiagorcfortunato.ragas_results.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    metrics = [name for name in rows[0] if name not in HEADER[:4]]
    found = records(path)
    for record, row in zip(found, rows, strict=True):
        assert set(record.scores) == {name for name in metrics if row[name] != ""}
    assert any(not record.scores for record in found)  # every metric failed on some row


def test_byte_order_mark_and_extra_text_column() -> None:
    with_bom = REAL / "wsj54924.ragas_results.csv"
    assert with_bom.read_bytes().startswith(b"\xef\xbb\xbf")
    assert detect_adapter(with_bom) == "ragas-result-csv"
    assert all(record.input for record in records(with_bom))
    # a ragas 0.1 ``question`` column beside the 0.2 columns stays text
    extra = REAL / "vicschol.RAGAS_HYBRID_Model_Validated.csv"
    assert {name for record in records(extra) for name in record.scores} == {
        "faithfulness",
        "answer_relevancy",
    }


# ---------------------------------------------------------------------------
# pandas layouts


def test_index_column_crlf_multiline_cells_and_value_kinds(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "r.csv",
        [
            ["", *HEADER, "passed", "judge", "steps"],
            ["0", "q, one", "['a', \"b\"]", "line 1\nline 2", "ref", "0.5", "True", "", "3"],
            ["1", "q2", "[]", "", "", "nan", "False", "gpt", "1e-3"],
            ["2", "q3", "[]", "r", "x", "", "True", "12", "-2"],
        ],
        terminator="\r\n",
    )
    found = records(path)
    assert [record.id for record in found] == ["0", "1", "2"]
    assert [dict(record.scores) for record in found] == [
        {"faithfulness": 0.5, "passed": 1.0, "steps": 3},
        {"passed": 0.0, "steps": 0.001},
        {"passed": 1.0, "steps": -2},
    ]
    first = found[0].to_dict()
    assert first["output"] == "line 1\nline 2"
    assert first["context"]["row_index"] == "0"
    assert first["context"]["upstream_record"]["retrieved_contexts"] == "['a', \"b\"]"
    assert "" not in first["context"]["upstream_record"]
    # an empty response or reference is null; ``judge`` began as text and stays text
    assert (found[1].output, found[1].expected) == (None, None)
    assert found[2].to_dict()["context"]["upstream_record"]["judge"] == "12"


def test_unnamed_index_column_is_not_a_metric(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "r.csv", [["Unnamed: 0", *HEADER], ["0", "q", "[]", "r", "e", "1.0"]]
    )
    assert IMPORTER.detect(path.read_bytes(), path)
    (record,) = records(path)
    assert dict(record.scores) == {"faithfulness": 1.0}
    assert record.to_dict()["context"]["row_index"] == "0"


def test_nan_cell_refused_when_nan_is_an_error(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", [HEADER, ["q", "[]", "r", "e", "nan"]])
    assert records(path)[0].scores == {}
    assert_refused(
        lambda: records(path, nan_as_missing_score=False),
        "non_finite_number",
        "rows[0].scores",
    )


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text(",".join(HEADER) + "\n\nq,[],r,e,1\n\n", encoding="utf-8")
    assert [dict(record.scores) for record in records(path)] == [{"faithfulness": 1}]


# ---------------------------------------------------------------------------
# Refusals: one case per rule, each file holding the canary

C = CANARY
ROW = [C, f"['{C}']", C, C, "0.5"]


def _rows(*rows: list[str]) -> Callable[[Path], Path]:
    return lambda tmp: write_csv(tmp / "r.csv", list(rows))


def _text(text: str) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / "r.csv"
        path.write_text(text, encoding="utf-8", newline="")
        return path

    return write


def _raw(data: bytes) -> Callable[[Path], Path]:
    def write(tmp: Path) -> Path:
        path = tmp / "r.csv"
        path.write_bytes(data)
        return path

    return write


REFUSALS: list[tuple[str, Callable[[Path], Path], str, str, dict[str, Any]]] = [
    ("empty-file", _text(""), "no_records", "file", {}),
    ("header-only", _rows(HEADER), "no_records", "file", {}),
    (
        "duplicate-column",
        _rows([*HEADER, "faithfulness"], [*ROW, "1"]),
        "duplicate_key",
        "header",
        {},
    ),
    ("unnamed-column-inside", _rows([*HEADER, ""], [*ROW, "1"]), "invalid_field", "header", {}),
    ("only-sample-fields", _rows(HEADER[:4], ROW[:4]), "not_results", "header", {}),
    ("no-user-input", _rows(["question", "faithfulness"], [C, "1"]), "missing_field", "header", {}),
    ("ragged-row", _rows(HEADER, ROW, [*ROW, C]), "invalid_document", "rows[1]", {}),
    ("short-row", _rows(HEADER, ROW[:3]), "invalid_document", "rows[0]", {}),
    (
        "broken-quoting",
        _text(",".join(HEADER) + f'\n{C},"[]"{C},r,e,1\n'),
        "invalid_document",
        "rows[0]",
        {},
    ),
    (
        "unterminated-quote",
        _text(",".join(HEADER) + f'\n{C},"[],r,e,1\n'),
        "invalid_document",
        "rows[0]",
        {},
    ),
    (
        "text-in-a-metric-column",
        _rows(HEADER, ROW, [*ROW[:4], C]),
        "non_numeric_score",
        "rows[1].scores",
        {},
    ),
    ("infinite-score", _rows(HEADER, [*ROW[:4], "inf"]), "non_finite_number", "rows[0].scores", {}),
    (
        "overflowing-score",
        _rows(HEADER, [*ROW[:4], "1e999"]),
        "non_finite_number",
        "rows[0].scores",
        {},
    ),
    (
        "integer-too-long",
        _rows(HEADER, [*ROW[:4], "9" * 4301]),
        "integer_too_long",
        "rows[0].scores",
        {},
    ),
    (
        "not-utf8",
        _raw((",".join(HEADER) + "\nq,[],r,e,1\n").encode() + b"\xff\n"),
        "not_utf8",
        "file",
        {},
    ),
    (
        "row-over-the-line-limit",
        _rows(HEADER, [C * 20, "[]", "r", "e", "1"]),
        "too_large",
        "rows[0]",
        {"max_line_bytes": 200},
    ),
    (
        "cell-over-the-field-limit",
        _rows(HEADER, [C, "x" * (ragas_csv.MAX_CELL_CHARS + 1), "r", "e", "1"]),
        "too_large",
        "rows[0]",
        {},
    ),
    (
        "too-many-columns",
        _rows([*HEADER, *(f"m{i}" for i in range(ragas_csv.MAX_COLUMNS))], ROW),
        "too_large",
        "header",
        {},
    ),
]


@pytest.mark.parametrize(
    ("write", "code", "field", "options"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_refusals(
    write: Callable[[Path], Path], code: str, field: str, options: dict[str, Any], tmp_path: Path
) -> None:
    path = write(tmp_path)
    assert_refused(lambda: records(path, **options), code, field)


def test_cell_limit_holds_whatever_the_csv_module_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ragas_csv, "MAX_CELL_CHARS", 40)  # the header's names fit
    path = write_csv(tmp_path / "r.csv", [HEADER, ["q", "[]", "r", C + C, "1"]])
    assert_refused(lambda: records(path), "too_large", "rows[0]")


def test_row_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ragas_csv, "MAX_ROWS", 2)
    assert len(records(write_csv(tmp_path / "two.csv", [HEADER, ROW, ROW]))) == 2
    path = write_csv(tmp_path / "r.csv", [HEADER, ROW, ROW, ROW])
    assert_refused(lambda: records(path), "too_large", "file")


def test_load_run_refuses_without_publishing_and_without_echo(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    path = write_csv(tmp_path / "r.csv", [HEADER, ROW, [*ROW[:4], C]])
    with pytest.raises(ImportRefusalError) as caught:
        load_run(
            path,
            "auto",
            source={"name": "ragas", "version": "0.2"},
            run_id="r",
            artifact_digest=DIGEST,
        )
    assert_refused(caught, "non_numeric_score", "rows[1].scores")
    assert "r.csv" not in str(caught.value)
    assert C not in caplog.text
    assert C not in repr(IMPORTER)
    # the command line says the same, naming the place and the code only
    out = tmp_path / "run.json"
    result = CliRunner().invoke(
        import_command,
        [
            str(path),
            "--source",
            "ragas@0.2",
            "--run-id",
            "r",
            "--artifact-digest",
            DIGEST,
            "-o",
            str(out),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 2
    assert result.stderr == "sealeval: error: rows[1].scores: non_numeric_score\n"
    assert C not in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    "head",
    [
        b"",
        b"user_input",
        b"user_input,response\n",  # no metric column
        b"user_input,retrieved_contexts\n",  # neither response nor reference
        b'{"user_input": "q", "response": "a", "m": 1}\n',  # JSON lines
        b'user_input,"response\n',  # unterminated quote in the header
        b"\xff\xfeuser_input,response,m\n",
    ],
)
def test_detection_needs_the_ragas_header(head: bytes) -> None:
    assert IMPORTER.detect(head, Path("x.csv")) is False


def test_detection_accepts_index_and_byte_order_mark() -> None:
    assert IMPORTER.detect(b"\xef\xbb\xbf,user_input,reference,m\r\n0,q,r,1\r\n", Path("x"))


@pytest.mark.parametrize(
    ("named", "path", "fits"),
    [
        ("ragas-result-rows", CSV_SAMPLE, "ragas-result-csv"),
        ("ragas-result-csv", TWIN, "ragas-result-rows"),
        ("jsonl", CSV_SAMPLE, "ragas-result-csv"),
    ],
)
def test_named_adapter_that_does_not_fit_names_the_one_that_does(
    named: str, path: Path, fits: str
) -> None:
    assert_refused(
        lambda: load_run(
            path, named, source={"name": "r", "version": "1"}, run_id="r", artifact_digest=DIGEST
        ),
        "adapter_mismatch",
        f"adapter[{fits}]",
    )


#: Cell text (a lone CR is left out: the csv writer leaves it unquoted with an LF terminator).
CELL_TEXT = st.text(
    st.sampled_from(list("ab Zé漢,\"'\n[]0.5;")),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            CELL_TEXT,
            CELL_TEXT,
            CELL_TEXT,
            st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
        ),
        min_size=1,
        max_size=5,
    ),
    terminator=st.sampled_from(["\n", "\r\n"]),
)
def test_written_rows_read_back(
    rows: list[tuple[str, str, str, float | None]], terminator: str
) -> None:
    """Whatever pandas-style quoting a cell needs, the row reads back as written."""
    with tempfile.TemporaryDirectory() as folder:
        path = write_csv(
            Path(folder) / "r.csv",
            [HEADER] + [[q, "[]", a, e, "" if m is None else repr(m)] for q, a, e, m in rows],
            terminator=terminator,
        )
        found = records(path)
    assert [facts(record) for record in found] == [
        (
            str(position),
            q,
            e or None,
            a or None,
            {} if m is None else {"faithfulness": m},
        )
        for position, (q, a, e, m) in enumerate(rows)
    ]
