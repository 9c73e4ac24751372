"""Tests for bayes_subsample.diagnostics.

Three kinds of checks:

* statistical: inefficiency factors of long AR(1) chains against the exact value
  ``(1 + phi) / (1 - phi)``;
* reference: ESS / R-hat / MCSE against ArviZ (test-only dependency) on the same
  draws, to rounding error; single-chain pieces against plain-loop implementations
  of the formulas in doc/algorithms/diagnostics.rst;
* API: summary table, cost arithmetic, input validation and edge cases.
"""

import warnings

import numpy as np
import pytest
from scipy.linalg import solve_toeplitz
from scipy.signal import lfilter

from bayes_subsample import diagnostics as diag


def ar1(rng, phi, shape):
    """Stationary AR(1) with unit innovations along the last axis."""
    e = rng.normal(size=shape)
    e[..., 0] /= np.sqrt(1.0 - phi**2)
    return lfilter([1.0], [1.0, -phi], e, axis=-1)


@pytest.fixture
def arviz():
    az = pytest.importorskip("arviz")
    # ArviZ logs/warns on degenerate inputs (constant chains, one chain); not our concern.
    warnings.filterwarnings("ignore", module="arviz")
    return az


# ---------------------------------------------------------------------------
# single chain: autocorrelation and IF
# ---------------------------------------------------------------------------
def test_autocorrelation_matches_direct_sum():
    rng = np.random.default_rng(0)
    x = ar1(rng, 0.6, 257)
    xc = x - x.mean()
    direct = np.array([xc[: x.size - t] @ xc[t:] for t in range(x.size)]) / (xc @ xc)
    rho = diag.autocorrelation(x)
    assert rho.shape == x.shape
    np.testing.assert_allclose(rho, direct, rtol=0, atol=1e-12)
    # axis argument: columns are separate chains
    both = diag.autocorrelation(np.column_stack([x, 2 * x + 1]), axis=0)
    np.testing.assert_allclose(both[:, 0], direct, atol=1e-12)
    np.testing.assert_allclose(both[:, 1], direct, atol=1e-12)


def _geyer_reference(x):
    """Plain-loop transcription of doc/algorithms/diagnostics.rst (Geyer initial monotone)."""
    n = len(x)
    xc = x - x.mean()
    rho = np.array([xc[: n - t] @ xc[t:] for t in range(n)]) / (xc @ xc)
    total, prev = 0.0, np.inf
    for j in range(n // 2):
        p = rho[2 * j] + rho[2 * j + 1]
        if p <= 0:
            break
        prev = min(p, prev)
        total += prev
    return -1.0 + 2.0 * total


@pytest.mark.parametrize("phi", [0.0, 0.7, -0.4])
def test_geyer_matches_reference_loop(phi):
    rng = np.random.default_rng(1)
    x = ar1(rng, phi, 600)
    assert diag.integrated_autocorr_time(x) == pytest.approx(_geyer_reference(x), rel=1e-10)
    assert diag.ess_single(x) == pytest.approx(600 / _geyer_reference(x), rel=1e-10)


def _ar_reference(x):
    """R's ar.yw (AIC order) + coda::effectiveSize, by brute force over orders."""
    n = len(x)
    xc = x - x.mean()
    order_max = int(min(n - 1, np.floor(10 * np.log10(n))))
    r = np.array([xc[: n - t] @ xc[t:] for t in range(order_max + 1)]) / n
    best = None
    for p in range(order_max + 1):
        if p == 0:
            phi, s2 = np.zeros(0), r[0]
        else:
            phi = solve_toeplitz(r[:p], r[1 : p + 1])
            s2 = r[0] - phi @ r[1 : p + 1]
        aic = n * np.log(s2) + 2 * p
        if best is None or aic < best[0]:
            best = (aic, p, phi, s2)
    _, p, phi, s2 = best
    spec0 = s2 * n / (n - p - 1) / (1 - phi.sum()) ** 2
    return spec0 / np.var(x, ddof=1)


@pytest.mark.parametrize("phi", [0.0, 0.8])
def test_ar_method_matches_brute_force_yule_walker(phi):
    rng = np.random.default_rng(2)
    # AR(2)-ish input so that the AIC choice is not trivially order 1
    x = ar1(rng, phi, 3000) + 0.5 * ar1(rng, -0.5, 3000)
    got = diag.integrated_autocorr_time(x, method="ar")
    assert got == pytest.approx(_ar_reference(x), rel=1e-9)


@pytest.mark.parametrize("method", ["geyer", "ar"])
@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_if_of_ar1_chain(method, phi):
    # True IF of a stationary AR(1) is (1 + phi) / (1 - phi).  With R = 200_000 the
    # relative sd of the estimate is ~ sqrt(2 (2M + 1) / R) for a lag window M of a few
    # IF (Sokal 1997); over 30 replicates it measured 0.5 %, 1.2 %, 2.8 % (Geyer) and
    # 0.5 %, 0.8 %, 1.3 % (AR) for phi = 0, 0.5, 0.9, so a 10 % band is > 3.5 sd wide.
    rng = np.random.default_rng(12345)
    x = ar1(rng, phi, 200_000)
    true = (1 + phi) / (1 - phi)
    assert diag.integrated_autocorr_time(x, method=method) == pytest.approx(true, rel=0.10)
    assert diag.ess_single(x, method=method) == pytest.approx(200_000 / true, rel=0.11)


def test_if_detects_wrong_value():
    # the phi = 0.9 chain must not look like phi = 0.8 (IF 19 vs 9): guards the test above
    rng = np.random.default_rng(12345)
    x = ar1(rng, 0.9, 200_000)
    assert diag.integrated_autocorr_time(x) > 1.5 * 9.0


def test_if_vectorised_over_axis():
    rng = np.random.default_rng(3)
    x = np.column_stack([ar1(rng, 0.3, 2000), ar1(rng, 0.8, 2000)])
    for method in ("geyer", "ar"):
        got = diag.integrated_autocorr_time(x, method=method, axis=0)
        assert got.shape == (2,)
        for j in range(2):
            assert got[j] == pytest.approx(
                diag.integrated_autocorr_time(x[:, j], method=method), rel=1e-12
            )
        t = diag.integrated_autocorr_time(x.T, method=method, axis=1)
        np.testing.assert_allclose(t, got, rtol=1e-12)
    np.testing.assert_allclose(diag.ess_single(x), 2000 / diag.integrated_autocorr_time(x))


def test_single_chain_constant_is_nan():
    x = np.full(100, 3.0)
    assert np.isnan(diag.integrated_autocorr_time(x))
    assert np.isnan(diag.integrated_autocorr_time(x, method="ar"))
    assert np.isnan(diag.ess_single(x))
    assert np.all(np.isnan(diag.autocorrelation(x)))


def test_antithetic_chain_if_is_floored():
    # perfectly alternating chain: rho_1 = -(R-1)/R, IF would be ~ -1; floored at 1/log10 R
    x = np.tile([1.0, -1.0], 50)
    assert diag.integrated_autocorr_time(x) == pytest.approx(1 / np.log10(100))


# ---------------------------------------------------------------------------
# several chains: agreement with ArviZ
# ---------------------------------------------------------------------------
def _draw_sets():
    rng = np.random.default_rng(4)
    return {
        "iid_4x500": rng.normal(size=(4, 500)),
        "ar1_0.9_3x1000": ar1(rng, 0.9, (3, 1000)),
        "ar1_-0.5_2x301_odd": ar1(rng, -0.5, (2, 301)),
        "shifted_4x400": ar1(rng, 0.5, (4, 400)) + np.array([[0.0], [0.0], [3.0], [-2.0]]),
        "heavy_tail_4x250": rng.standard_t(2.0, size=(4, 250)),
        "ties_4x200": np.round(ar1(rng, 0.7, (4, 200))),
        "one_chain_1x800": ar1(rng, 0.6, (1, 800)),
        "tiny_2x5": rng.normal(size=(2, 5)),
    }


@pytest.mark.parametrize("name", list(_draw_sets()))
def test_matches_arviz(arviz, name):
    x = _draw_sets()[name]
    rtol = 1e-8  # both sides are the same formulas in double precision (FFT pad may differ)
    checks = {
        "ess_bulk": (diag.ess_bulk(x), arviz.ess(x, method="bulk")),
        "ess_tail": (diag.ess_tail(x), arviz.ess(x, method="tail")),
        "ess_mean": (diag.ess_mean(x), arviz.ess(x, method="mean")),
        "ess_q30": (diag.ess_quantile(x, 0.3), arviz.ess(x, method="quantile", prob=0.3)),
        "mcse_mean": (diag.mcse_mean(x), arviz.mcse(x, method="mean")),
        "mcse_q80": (diag.mcse_quantile(x, 0.8), arviz.mcse(x, method="quantile", prob=0.8)),
        "rhat": (diag.rhat(x), arviz.rhat(x, method="rank")),
    }
    for key, (ours, ref) in checks.items():
        assert isinstance(ours, float), key
        np.testing.assert_allclose(ours, float(ref), rtol=rtol, err_msg=f"{name}: {key}")


def test_shifted_chains_have_large_rhat(arviz):
    x = _draw_sets()["shifted_4x400"]
    r = diag.rhat(x)
    assert r > 1.5  # chains 3 and 4 sit 3 and 2 sd away
    assert r == pytest.approx(float(arviz.rhat(x, method="rank")), rel=1e-8)
    assert diag.rhat(_draw_sets()["iid_4x500"]) < 1.01


def test_vectorised_over_params_matches_arviz(arviz):
    rng = np.random.default_rng(5)
    x = np.stack([ar1(rng, phi, (4, 300)) for phi in (0.0, 0.5, 0.9)], axis=-1)
    x[:, :, 2] += np.array([0.0, 0.0, 0.0, 4.0])[:, None]
    funcs = {
        "bulk": (diag.ess_bulk, lambda a: arviz.ess(a, method="bulk")),
        "tail": (diag.ess_tail, lambda a: arviz.ess(a, method="tail")),
        "mean": (diag.ess_mean, lambda a: arviz.ess(a, method="mean")),
        "mcse": (diag.mcse_mean, lambda a: arviz.mcse(a, method="mean")),
        "rhat": (diag.rhat, lambda a: arviz.rhat(a, method="rank")),
    }
    for key, (ours, ref) in funcs.items():
        got = ours(x)
        assert got.shape == (3,), key
        want = [float(ref(x[:, :, j])) for j in range(3)]
        np.testing.assert_allclose(got, want, rtol=1e-8, err_msg=key)
    # arbitrary trailing shape is preserved
    assert diag.ess_bulk(x.reshape(4, 300, 3, 1)).shape == (3, 1)


def test_constant_draws_follow_arviz(arviz):
    x = np.full((4, 100), 2.5)
    assert diag.ess_bulk(x) == float(arviz.ess(x, method="bulk")) == 400
    assert diag.ess_tail(x) == float(arviz.ess(x, method="tail")) == 400
    assert diag.ess_mean(x) == float(arviz.ess(x, method="mean")) == 400
    assert diag.mcse_mean(x) == 0.0
    assert np.isnan(diag.rhat(x)) and np.isnan(arviz.rhat(x, method="rank"))
    # a constant column does not disturb its neighbours
    rng = np.random.default_rng(6)
    y = np.stack([np.full((4, 100), 1.0), rng.normal(size=(4, 100))], axis=-1)
    np.testing.assert_allclose(diag.ess_bulk(y), [400.0, diag.ess_bulk(y[:, :, 1])])


def test_multichain_ess_of_ar1():
    # ess_mean of 4 x 50_000 AR(1) draws with phi = 0.5 is about S / 3; relative sd of the
    # IF estimate is ~1 % at this length (see test_if_of_ar1_chain), so 10 % is generous.
    rng = np.random.default_rng(7)
    x = ar1(rng, 0.5, (4, 50_000))
    assert diag.ess_mean(x) == pytest.approx(200_000 / 3, rel=0.10)
    assert diag.ess_bulk(x) == pytest.approx(200_000 / 3, rel=0.10)
    assert diag.rhat(x) < 1.01


def test_single_chain_rhat_is_nan():
    x = np.random.default_rng(8).normal(size=(1, 100))
    assert np.isnan(diag.rhat(x))
    assert np.isnan(diag.rhat(x[0]))  # 1-D is one chain
    assert np.isfinite(diag.ess_bulk(x[0]))


def test_ess_is_capped():
    # strongly antithetic chains: ESS capped at S log10 S, as ArviZ
    x = np.tile([1.0, -1.0], (4, 50)) + 1e-3 * np.random.default_rng(9).normal(size=(4, 100))
    assert diag.ess_mean(x) <= 400 * np.log10(400) * (1 + 1e-12)


# ---------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------
def test_summary_content():
    rng = np.random.default_rng(10)
    x = np.stack(
        [
            rng.normal(size=(4, 500)),
            ar1(rng, 0.8, (4, 500)),
            rng.normal(size=(4, 500)) + np.arange(4)[:, None],
        ],
        axis=-1,
    )
    s = diag.summary(x, names=["alpha", "beta", "gamma"])
    assert len(s) == 3
    d = s.to_dict()
    assert d["name"] == ["alpha", "beta", "gamma"]
    assert set(d) == {"name", *diag.Summary.columns}
    flat = x.reshape(-1, 3)
    np.testing.assert_allclose(d["mean"], flat.mean(axis=0))
    np.testing.assert_allclose(d["sd"], flat.std(axis=0, ddof=1))
    np.testing.assert_allclose(d["q5"], np.quantile(flat, 0.05, axis=0))
    np.testing.assert_allclose(d["q95"], np.quantile(flat, 0.95, axis=0))
    np.testing.assert_allclose(d["ess_bulk"], diag.ess_bulk(x))
    np.testing.assert_allclose(d["ess_tail"], diag.ess_tail(x))
    np.testing.assert_allclose(d["mcse_mean"], diag.mcse_mean(x))
    np.testing.assert_allclose(d["r_hat"], diag.rhat(x))
    assert d["r_hat"][0] < 1.01 and d["r_hat"][2] > 1.1
    assert d["ess_bulk"][1] < d["ess_bulk"][0]  # autocorrelated parameter has fewer ESS
    # to_dict returns copies
    d["mean"][:] = 0
    assert s["mean"][0] != 0
    text = str(s)
    lines = text.splitlines()
    assert len(lines) == 4 and lines[0].split()[0] == "name"
    assert lines[2].startswith("beta") and len({len(line) for line in lines}) == 1  # aligned
    assert "Summary(3 parameters)" in repr(s)
    with pytest.raises(KeyError, match="unknown column"):
        s["hdi"]


def test_summary_defaults_and_pandas():
    x = np.random.default_rng(11).normal(size=(4, 500, 2))
    s = diag.summary(x)
    assert s.names == ["x[0]", "x[1]"]
    assert diag.summary(x[:, :, 0]).names == ["x"]
    pd = pytest.importorskip("pandas")
    df = s.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(diag.Summary.columns)
    assert list(df.index) == ["x[0]", "x[1]"]
    with pytest.raises(ValueError, match="names has 3 entries"):
        diag.summary(x, names=["a", "b", "c"])


# ---------------------------------------------------------------------------
# cost
# ---------------------------------------------------------------------------
def test_computing_time_arithmetic():
    assert diag.computing_time(2.0, 100.0) == 200.0
    assert diag.computing_time(2.0, 100.0, tau=0.75) == pytest.approx(800.0)
    assert diag.computing_time(2.0, 100.0, tau=1.0) == pytest.approx(200.0)
    assert diag.computing_time(2.0, 100.0, tau=0.5) == np.inf
    np.testing.assert_allclose(
        diag.computing_time([1.0, 3.0, 5.0], 10.0, tau=[1.0, 0.9, 0.25]),
        [10.0, 30.0 / 0.8**2, 50.0 / 0.25],
    )


def test_relative_computing_time():
    ct_ref = diag.computing_time(np.array([2.0, 4.0, 8.0]), 1000.0)
    ct_new = diag.computing_time(np.array([10.0, 10.0, 10.0]), 50.0)
    rct = diag.relative_computing_time(ct_ref, ct_new)
    np.testing.assert_allclose(rct, [0.25, 0.125, 0.0625])
    assert diag.relative_computing_time(10.0, 30.0) == pytest.approx(3.0)
    s = diag.rct_summary(rct)
    assert s == (0.0625, 0.125, 0.25)
    assert s.min == 0.0625 and s.median == 0.125 and s.max == 0.25


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: diag.computing_time(-1.0, 10.0), "positive"),
        (lambda: diag.computing_time(1.0, 0.0), "positive"),
        (lambda: diag.computing_time(np.nan, 10.0), "NaN"),
        (lambda: diag.computing_time(1.0, 10.0, tau=1.2), r"\[0, 1\]"),
        (lambda: diag.relative_computing_time(0.0, 1.0), "positive"),
        (lambda: diag.rct_summary([]), "empty"),
        (lambda: diag.rct_summary([1.0, np.nan]), "NaN"),
    ],
)
def test_cost_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------
MULTI = [diag.rhat, diag.ess_bulk, diag.ess_tail, diag.ess_mean, diag.mcse_mean, diag.summary]
SINGLE = [diag.autocorrelation, diag.integrated_autocorr_time, diag.ess_single]


@pytest.mark.parametrize("func", MULTI)
def test_multichain_validation(func):
    good = np.random.default_rng(12).normal(size=(2, 50))
    bad_nan = good.copy()
    bad_nan[1, 7] = np.nan
    bad_inf = good.copy()
    bad_inf[0, 3] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        func(bad_nan)
    with pytest.raises(ValueError, match="NaN or infinite"):
        func(bad_inf)
    with pytest.raises(ValueError, match="at least 4 draws"):
        func(good[:, :3])
    with pytest.raises(ValueError, match="scalar"):
        func(1.0)
    with pytest.raises(ValueError, match="numeric"):
        func([["a", "b", "c", "d"]])


@pytest.mark.parametrize("func", SINGLE)
def test_single_chain_validation(func):
    with pytest.raises(ValueError, match="NaN or infinite"):
        func(np.array([1.0, np.nan, 2.0, 3.0, 4.0]))
    with pytest.raises(ValueError, match="at least 4 draws"):
        func(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="scalar"):
        func(1.0)


def test_bad_method_and_prob():
    x = np.random.default_rng(13).normal(size=(2, 50))
    with pytest.raises(ValueError, match="method must be"):
        diag.integrated_autocorr_time(x[0], method="batch")
    for bad in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(ValueError, match="prob must lie"):
            diag.ess_quantile(x, bad)
        with pytest.raises(ValueError, match="prob must lie"):
            diag.mcse_quantile(x, bad)


def test_column_blocks_give_the_same_diagnostics(monkeypatch):
    """The column-wise diagnostics run on blocks of parameters (bounded
    temporaries on wide traces): the same values as on the whole trace."""
    from bayes_subsample import diagnostics as d
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 200, 40)).cumsum(axis=1) * 0.2 + rng.normal(size=(3, 200, 40))
    fns = [d.rhat, d.ess_bulk, d.ess_tail, d.ess_mean, d.mcse_mean,
           lambda a: d.ess_quantile(a, 0.2), lambda a: d.mcse_quantile(a, 0.7)]
    fns += [lambda a, c=c: d.summary(a)[c] for c in d.Summary.columns]
    whole = [f(x) for f in fns]
    monkeypatch.setattr(d._core, "_BLOCK_VALUES", 3 * 200 * 7)  # blocks of 7 columns
    blocked = [f(x) for f in fns]
    for a, b in zip(whole, blocked):
        assert a.shape == (40,)
        np.testing.assert_allclose(b, a, rtol=1e-10)
