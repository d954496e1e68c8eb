"""`teapot-lb validate PATH...`: accepts the shipped examples, rejects broken manifests."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from teapot_lb.cli.validate import validate

ROOT = Path(__file__).resolve().parents[2]
INVALID = Path(__file__).parent / "invalid"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(validate, list(args))
    return result.exit_code, result.output


def test_the_shipped_examples_are_valid_and_summarised() -> None:
    code, output = run(str(ROOT / "examples"))
    assert code == 0, output
    assert output.startswith("OK: ")
    assert "AddressPool" in output and "BGPPeer" in output and "Service" in output


def test_each_broken_fixture_is_rejected_with_kind_name_field_and_file() -> None:
    fixtures = sorted(INVALID.glob("*.yaml"))
    assert fixtures
    for fixture in fixtures:
        code, output = run(str(fixture))
        assert code == 1, f"{fixture.name} was accepted"
        expected = fixture.read_text().splitlines()[0].removeprefix("# expect: ")
        assert expected in output, f"{fixture.name}: {expected!r} not in:\n{output}"
        assert str(fixture) in output


def test_problems_are_listed_one_per_line_with_a_count() -> None:
    code, output = run(str(INVALID))
    assert code == 1
    lines = output.strip().splitlines()
    assert lines[-1].endswith(f"of {len(list(INVALID.glob('*.yaml')))} file(s)")
    assert all(": " in line for line in lines[:-1])


def test_a_missing_path_is_a_problem_not_a_traceback() -> None:
    code, output = run("/nonexistent/manifests")
    assert code == 1
    assert "no such file or directory" in output


def test_unknown_kinds_can_be_skipped(tmp_path: Path) -> None:
    (tmp_path / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
    )
    assert run(str(tmp_path))[0] == 1
    code, output = run("--ignore-unknown-kinds", str(tmp_path))
    assert code == 0, output


def test_hidden_folders_such_as_the_standalone_state_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "pool.yaml").write_text(
        "apiVersion: lb.teapot.io/v1alpha1\nkind: AddressPool\n"
        "metadata: {name: p, namespace: lb-system}\nspec: {addresses: [192.0.2.0/28]}\n"
    )
    state = tmp_path / ".state" / "node-a"
    state.mkdir(parents=True)
    (state / "status.json").write_text('{"node": "node-a", "services": {}}')
    code, output = run(str(tmp_path))
    assert code == 0, output
    assert "1 object(s) in 1 file(s)" in output


DOCS_MD5 = """\
apiVersion: v1
kind: Secret
metadata: {name: tor-md5, namespace: teapot-lb-system}
stringData:
  password: change-me
---
apiVersion: lb.teapot.io/v1alpha1
kind: BGPPeer
metadata: {name: tor, namespace: teapot-lb-system}
spec:
  myASN: 64512
  peerASN: 64500
  peerAddress: 192.0.2.1
  passwordSecret: {name: tor-md5}
"""


def test_the_md5_secret_of_docs_bgp_is_accepted_and_counted(tmp_path: Path) -> None:
    (tmp_path / "peer.yaml").write_text(DOCS_MD5)
    code, output = run(str(tmp_path))
    assert code == 0, output
    assert "1 BGPPeer" in output and "1 Secret" in output


def test_a_passwordsecret_missing_from_manifests_with_secrets_is_a_problem(
    tmp_path: Path,
) -> None:
    (tmp_path / "peer.yaml").write_text(DOCS_MD5.replace("name: tor-md5}", "name: other}", 1))
    code, output = run(str(tmp_path))
    assert code == 1
    assert "BGPPeer/teapot-lb-system/tor: spec.passwordSecret: Secret" in output
    assert "teapot-lb-system/other not found" in output


def test_a_secret_whose_data_is_not_base64_is_a_problem_naming_the_key(tmp_path: Path) -> None:
    bad = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: x}\ndata: {password: '%%'}\n"
    )
    (tmp_path / "s.yaml").write_text(bad)
    code, output = run(str(tmp_path))
    assert code == 1 and "Secret/x/s: data[password]: is not base64" in output
