"""Standalone mode without namespaces: reading the directory, assigning IPs, explain."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from teapot_lb.cli.explain import explain_command, manifest_view
from teapot_lb.cluster import Kind, Store
from teapot_lb.lab.standalone_lab import EXCLUDE, endpoints, node, ours, service, write
from teapot_lb.model import IPAddress
from teapot_lb.standalone.assign import assign
from teapot_lb.standalone.directory import fingerprint, manifest_files, read
from teapot_lb.standalone.runner import ManifestSource


def config() -> list[dict[str, Any]]:
    return [
        ours("AddressPool", "public", {"addresses": ["203.0.113.0/29"]}),
        ours("BGPPeer", "router", {"myASN": 64512, "peerASN": 64500, "peerAddress": "192.0.2.1"}),
        ours("BGPAdvertisement", "public", {"addressPools": ["public"]}),
    ]


def services(n: int) -> list[dict[str, Any]]:
    return [service(f"svc{i:02d}") for i in range(n)]


def test_assignment_is_the_same_whatever_the_order_objects_are_read_in(tmp_path: Path) -> None:
    docs = config() + services(6)
    results = []
    for seed in range(4):
        shuffled = list(docs)
        random.Random(seed).shuffle(shuffled)
        d = tmp_path / f"d{seed}"
        d.mkdir()
        for i, doc in enumerate(shuffled):  # one file per object, names in shuffled order
            write(d / f"{i:02d}.yaml", [doc])
        view = read(d).view()
        results.append({k: a.ips for k, a in assign(view).items()})
    assert all(r == results[0] for r in results)
    ips = [ip for r in results[0].values() for ip in r]
    assert len(ips) == len(set(ips)) == 6


def test_ips_shown_in_manifest_status_and_pinned_ips_are_kept(tmp_path: Path) -> None:
    held = service("held")
    held["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}]}}
    write(
        tmp_path / "all.yaml",
        [*config(), service("aaa"), held, service("pinned", "203.0.113.3")],
    )
    got = assign(read(tmp_path).view())
    assert [str(ip) for ip in got["default/held"].ips] == ["203.0.113.5"]
    assert [str(ip) for ip in got["default/pinned"].ips] == ["203.0.113.3"]
    assert got["default/aaa"].ips and got["default/aaa"].pool == "public"


def test_a_service_that_does_not_fit_is_refused_with_the_reason(tmp_path: Path) -> None:
    write(tmp_path / "all.yaml", [*config(), *services(9)])
    got = assign(read(tmp_path).view())
    refused = [a for a in got.values() if a.refused]
    assert [a.key for a in refused] == ["default/svc08"]  # the last in key order
    assert "no free IPv4 address in eligible pools (public)" in str(refused[0].refused)


def test_bad_manifests_are_reported_and_the_rest_is_used(tmp_path: Path) -> None:
    write(tmp_path / "good.yaml", [*config(), service("web")])
    (tmp_path / "broken.yaml").write_text("kind: [unclosed\n")
    write(
        tmp_path / "badpeer.yaml",
        [ours("BGPPeer", "bad", {"myASN": 0, "peerASN": 64500, "peerAddress": "192.0.2.9"})],
    )
    snap = read(tmp_path)
    texts = [str(p) for p in snap.problems]
    assert any("broken.yaml" in t and "YAML" in t for t in texts), texts
    assert any("BGPPeer" in t and "bad" in t for t in texts), texts
    assert "default/web" in snap.objects[Kind.SERVICE]
    assert "lb-system/bad" not in snap.objects.get(Kind.BGP_PEER, {})
    assert assign(snap.view())["default/web"].ips


def test_hidden_files_and_the_state_directory_are_not_manifests(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", config())
    (tmp_path / ".state" / "n1").mkdir(parents=True)
    (tmp_path / ".state" / "n1" / "status.json").write_text("{}")
    (tmp_path / ".a.yaml.swp").write_text("junk")
    state = tmp_path / "st"
    state.mkdir()
    (state / "x.json").write_text("{}")
    assert manifest_files(tmp_path, skip=state) == [tmp_path / "a.yaml"]


def test_an_edit_changes_the_fingerprint_and_reloads_the_store(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", [*config(), service("web")])
    store = Store()
    calls: list[int] = []
    source = ManifestSource(tmp_path, store, on_change=lambda: calls.append(1))
    assert source.reload_if_changed()
    assert not source.reload_if_changed()
    before = fingerprint(manifest_files(tmp_path))
    write(tmp_path / "a.yaml", [*config(), service("web"), service("api")])
    assert fingerprint(manifest_files(tmp_path)) != before
    assert source.reload_if_changed()
    view = store.view()
    assert set(view.services) == {"default/web", "default/api"}
    assert all(view.ingress_ips(k, s) for k, s in view.services.items())
    assert calls == [1, 1]


def held_ips(store: Store) -> dict[str, list[IPAddress]]:
    view = store.view()
    return {k: view.ingress_ips(k, s) for k, s in view.services.items()}


def lab_dir(tmp_path: Path, excluded: bool = False) -> Path:
    labels = {EXCLUDE: ""} if excluded else {}
    write(
        tmp_path / "all.yaml",
        [
            *config(),
            node("n1"),
            node("n2"),
            node("n3", **labels),
            service("web"),
            service("local", externalTrafficPolicy="Local"),
            endpoints("local", "n2"),
        ],
    )
    return tmp_path


def test_explain_prints_a_row_per_node_with_the_reason(tmp_path: Path) -> None:
    d = lab_dir(tmp_path, excluded=True)
    out = CliRunner().invoke(explain_command, ["default/web", "--manifests", str(d)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == "Service default/web"
    assert lines[1].split() == ["NODE", "IP", "MODE", "ANNOUNCES", "WHY"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert "yes" in rows["n1"].split() and "announced to router" in rows["n1"]
    assert "no" in rows["n3"].split() and f"excluded: node has label {EXCLUDE}" in rows["n3"]


def test_explain_json_says_why_local_policy_skips_nodes(tmp_path: Path) -> None:
    d = lab_dir(tmp_path)
    out = CliRunner().invoke(explain_command, ["local", "--manifests", str(d), "-o", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["service"] == "default/local"
    by_node = {r["node"]: r for r in doc["decisions"]}
    assert by_node["n2"]["announces"] is True and by_node["n2"]["peers"] == ["router"]
    assert by_node["n1"]["announces"] is False
    assert "no local endpoint" in by_node["n1"]["reason"]


def test_explain_of_an_unknown_service_fails_with_a_message(tmp_path: Path) -> None:
    out = CliRunner().invoke(explain_command, ["nope", "--manifests", str(lab_dir(tmp_path))])
    assert out.exit_code != 0
    assert "Service default/nope not found" in out.output


def test_manifest_view_carries_the_assigned_status(tmp_path: Path) -> None:
    view = manifest_view(lab_dir(tmp_path))
    assert view.services["default/web"].ingress_ips()


def test_a_file_that_stops_parsing_keeps_its_last_good_content(tmp_path: Path) -> None:
    write(tmp_path / "config.yaml", config())
    write(tmp_path / "services.yaml", [service("web"), service("api")])
    store = Store()
    source = ManifestSource(tmp_path, store)
    source.reload_if_changed()
    before = held_ips(store)
    (tmp_path / "services.yaml").write_text("- half: [written\n")  # a save in progress
    source.reload_if_changed()
    assert held_ips(store) == before
    loaded = source.loaded
    assert loaded is not None
    texts = [str(p) for p in loaded.snapshot.problems]
    assert any("services.yaml" in t and "last good content" in t for t in texts), texts
    (tmp_path / "services.yaml").unlink()  # a deleted file takes its objects with it
    source.reload_if_changed()
    assert store.view().services == {}


def test_explain_now_column_shows_what_the_running_nodes_report(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    d = lab_dir(tmp_path / "m")
    state = tmp_path / "state"
    view = manifest_view(d)
    ip = str(view.services["default/web"].ingress_ips()[0])
    for name, doc in {
        "n1": {"services": {"default/web": {"announcing": f"bgp {ip} to router"}}},
        "n2": {"stopped": True, "services": {}},
    }.items():
        (state / name).mkdir(parents=True)
        (state / name / "status.json").write_text(json.dumps(doc))
    out = CliRunner().invoke(
        explain_command, ["web", "--manifests", str(d), "--state-root", str(state)]
    )
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[1].split() == ["NODE", "IP", "MODE", "ANNOUNCES", "NOW", "WHY"]
    now = {line.split()[0]: line.split()[4] for line in lines[2:]}
    assert now == {"n1": "yes", "n2": "stopped", "n3": "?"}
    doc = json.loads(
        CliRunner()
        .invoke(
            explain_command,
            ["web", "--manifests", str(d), "--state-root", str(state), "-o", "json"],
        )
        .output
    )
    assert [r["now"] for r in doc["decisions"]] == ["yes", "stopped", "?"]


def test_only_changed_files_are_parsed_again(tmp_path: Path, monkeypatch: Any) -> None:
    from teapot_lb.standalone import delta, directory

    write(tmp_path / "config.yaml", config())
    write(tmp_path / "services.yaml", [service("web")])
    parsed: list[str] = []
    real = directory.read_documents

    def counting(paths: Any) -> Any:
        parsed.extend(Path(p).name for p in paths)
        return real(paths)

    monkeypatch.setattr(directory, "read_documents", counting)  # a full reload
    monkeypatch.setattr(delta, "read_documents", counting)  # a quick one
    source = ManifestSource(tmp_path, Store())
    source.reload_if_changed()
    assert sorted(parsed) == ["config.yaml", "services.yaml"]
    parsed.clear()
    write(tmp_path / "services.yaml", [service("web"), service("api")])
    source.reload_if_changed()
    assert parsed == ["services.yaml"]


# --- conflicts are decided by age, not by name ------------------------------------------------


def test_the_service_seen_first_keeps_a_requested_ip_after_a_restart(tmp_path: Path) -> None:
    manifests, state = tmp_path / "m", tmp_path / "state"
    manifests.mkdir()
    write(manifests / "a.yaml", [*config(), service("zz-first", "203.0.113.3")])
    ManifestSource(manifests, Store(), state_dir=state).reload()
    write(manifests / "b.yaml", [service("aa-later", "203.0.113.3")])
    for _ in range(2):  # the running node, then the same node restarted
        loaded = ManifestSource(manifests, Store(), state_dir=state).reload()
        assert [str(ip) for ip in loaded.assignments["default/zz-first"].ips] == ["203.0.113.3"]
        assert loaded.assignments["default/aa-later"].refused is not None
        reported = [str(p) for p in loaded.snapshot.problems]
        assert any(p.startswith("Service/default/aa-later") for p in reported), reported
    assert json.loads((state / "first-seen.json").read_text()).keys() >= {
        "Service/default/zz-first",
        "Service/default/aa-later",
    }


def test_a_creation_timestamp_in_the_manifest_wins_over_first_seen(tmp_path: Path) -> None:
    manifests, state = tmp_path / "m", tmp_path / "state"
    manifests.mkdir()
    write(manifests / "a.yaml", [*config(), service("zz-first", "203.0.113.3")])
    ManifestSource(manifests, Store(), state_dir=state).reload()
    older = service("aa-older", "203.0.113.3")
    older["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    write(manifests / "b.yaml", [older])
    loaded = ManifestSource(manifests, Store(), state_dir=state).reload()
    assert [str(ip) for ip in loaded.assignments["default/aa-older"].ips] == ["203.0.113.3"]
    assert loaded.assignments["default/zz-first"].refused is not None


def test_a_forgotten_object_coming_back_is_a_newcomer(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from teapot_lb.model.manifest import parse_object
    from teapot_lb.standalone.first_seen import stamp

    obj, _ = parse_object(service("web"))
    assert obj is not None
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    stamped, seen = stamp([obj], {}, t0)
    assert stamped[0].metadata.creation_timestamp == t0
    _, seen = stamp([], seen, t0 + timedelta(seconds=1))
    assert seen == {}
    again, _ = stamp([obj], seen, t0 + timedelta(seconds=2))
    assert again[0].metadata.creation_timestamp == t0 + timedelta(seconds=2)


def test_an_overlapping_pool_holding_no_service_ip_yields_even_when_older(
    tmp_path: Path,
) -> None:
    old_empty = ours("AddressPool", "old", {"addresses": ["203.0.113.0/29"]})
    old_empty["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    in_use = ours("AddressPool", "zz-new", {"addresses": ["203.0.113.0/30"], "autoAssign": False})
    in_use["metadata"]["creationTimestamp"] = "2021-01-01T00:00:00Z"
    pinned = service("pinned", "203.0.113.1")
    pinned["metadata"]["annotations"]["lb.teapot.io/pool"] = "zz-new"
    write(tmp_path / "all.yaml", [old_empty, in_use, pinned])
    snap = read(tmp_path)
    overlap = [str(p) for p in snap.problems if "overlaps" in p.message]
    assert len(overlap) == 1 and overlap[0].startswith("AddressPool/lb-system/old"), overlap
    got = assign(snap.view())
    assert got["default/pinned"].pool == "zz-new"


def test_explain_decides_a_conflict_as_the_nodes_do(tmp_path: Path) -> None:
    manifests, root = tmp_path / "m", tmp_path / "m" / ".state"
    manifests.mkdir()
    write(manifests / "a.yaml", [*config(), service("zz-first", "203.0.113.3")])
    ManifestSource(manifests, Store(), state_dir=root / "n1").reload()
    write(manifests / "b.yaml", [service("aa-later", "203.0.113.3")])
    view = manifest_view(manifests, root)
    assert [str(ip) for ip in view.services["default/zz-first"].ingress_ips()] == ["203.0.113.3"]
    assert view.services["default/aa-later"].ingress_ips() == []
