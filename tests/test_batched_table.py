"""``benchmarks/batched_table.py``: the batched benchmark's cases against the fastest peer and the copy bound."""

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "batched_table.py"


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("batched_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(peer: str, ns: float, op: str = "lu float64 B=10000", n: int = 8) -> dict:
    return {"name": f"test_batched[lu-{peer}-float64-{n}-10000]",
            "extra_info": {"op": op, "n": n, "peer": peer, "ns_per_matrix": ns, "bound_ns": 50.0,
                           "achieved_GBps": 4.0}}


def test_each_case_is_read_against_its_fastest_peer_and_the_copy_bound(table):
    rows = table.rows([_row("hetlapack", 200.0), _row("torch", 260.0), _row("jax", 600.0), _row("scipy", 9000.0),
                       _row("torch", 100.0, n=16)])
    assert len(rows) == 1  # a case hetlapack did not run has no row
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[:6] == ["lu float64 B=10000", "8", "200", "4.0", "50", "4.0x"]
    assert cells[6:10] == ["–", "1.30x", "3.00x", "45.00x"]
    assert cells[10] == "1.30x"
    assert cells[11] == "< 1.5x peer, > 2.5x bound"


def test_targets_by_order_and_dtype(table):
    assert table.misses(("qr", "float64", 10_000, 32), 1.2, 2.0) == []
    assert table.misses(("qr", "float64", 10_000, 16), 1.2, 2.0) == ["< 1.5x peer"]
    assert table.misses(("qr", "float64", 10_000, 64), 0.9, 9.0) == ["< 1.0x peer"]
    assert table.misses(("qr", "float32", 10_000, 8), 2.0, 9.0) == []
    assert table.misses(("qr", "float64", 10_000, 8), None, 3.0) == ["> 2.5x bound"]


def test_a_case_dispatch_sent_elsewhere_names_its_path(table):
    ours = _row("hetlapack", 200.0)
    assert table.rows([ours])[0].startswith("| lu float64 B=10000 | 8 |")
    ours["extra_info"]["path"] = "batched"
    assert table.rows([ours])[0].startswith("| lu float64 B=10000 | 8 |")
    ours["extra_info"]["path"] = "host"
    assert table.rows([ours])[0].startswith("| lu float64 B=10000 (host path) | 8 |")


def test_the_head_gives_the_range_of_copy_rates_the_cases_read(table):
    rows = [_row("hetlapack", 200.0), _row("torch", 260.0, n=16)]
    for row, copy in zip(rows, (21.5, 26.25), strict=True):
        row["extra_info"]["copy_GBps"] = copy
    head = table.head({"benchmarks": rows, "hetlapack_machine": {"cpu": "AMD EPYC", "dgemm_gflops": 95.4}})
    assert head[1].startswith("DGEMM 95.4 GFLOP/s and copy 21.5-26.2 GB/s in this run")
