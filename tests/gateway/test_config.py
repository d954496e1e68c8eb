"""The config model: what it accepts, what it refuses, and `problems` naming the part."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from teapot_lb.gateway.config import (
    Backend,
    BackendRef,
    Certificate,
    GatewayConfig,
    HeaderMatch,
    HTTPRoute,
    HTTPRule,
    Listener,
    PathMatch,
    PathType,
    Protocol,
    RouteSemantics,
    StreamRoute,
    changed_objects,
    problems,
)
from teapot_lb.gateway.hosts import matches

from .builders import backend, ingress, listener


def _http(name: str = "web", port: int = 80) -> Listener:
    return Listener(name=name, address="192.0.2.10", port=port, protocol=Protocol.HTTP)


def test_a_config_file_in_camel_case_parses_into_the_model() -> None:
    cfg = GatewayConfig.model_validate(
        {
            "listeners": [{"name": "web", "address": "192.0.2.10", "port": 80, "protocol": "HTTP"}],
            "backends": [{"name": "b", "endpoints": [{"address": "198.51.100.2", "port": 8080}]}],
            "httpRoutes": [
                {
                    "listeners": ["web"],
                    "hostnames": ["a.example"],
                    "semantics": "Ingress",
                    "rules": [
                        {
                            "matches": [{"path": {"type": "Exact", "value": "/x"}}],
                            "backends": [{"backend": "b"}],
                        }
                    ],
                }
            ],
        }
    )
    assert cfg.http_routes[0].rules[0].matches[0].path == PathMatch(type="Exact", value="/x")
    assert problems(cfg) == []


def test_a_certificate_needs_exactly_one_source() -> None:
    with pytest.raises(ValidationError, match="either certPem and keyPem"):
        Certificate(name="c")
    with pytest.raises(ValidationError, match="go together"):
        Certificate(name="c", cert_pem="x")


def test_a_name_that_could_inject_haproxy_configuration_is_refused() -> None:
    with pytest.raises(ValidationError):
        Backend(name="b\n  option foo")


def test_problems_name_the_unknown_backend_and_the_wrong_listener_protocol() -> None:
    cfg = GatewayConfig(
        listeners=(_http(),),
        tcp_routes=(StreamRoute(listeners=("web",), backends=(BackendRef(backend="nope"),)),),
    )
    found = problems(cfg)
    assert any("listener 'web' speaks HTTP" in p for p in found)
    assert any("no backend named 'nope'" in p for p in found)


def test_two_listeners_on_one_socket_are_a_problem_and_https_without_certificate_is_not() -> None:
    cfg = GatewayConfig(
        listeners=(
            _http("a"),
            _http("b"),
            Listener(name="s", address="192.0.2.10", port=443, protocol=Protocol.HTTPS),
        ),
        http_routes=(HTTPRoute(listeners=("a",), rules=(HTTPRule(),)),),
    )
    found = problems(cfg)
    assert any("2 listeners on 192.0.2.10:80/tcp" in p for p in found)
    # (HTTPS without a certificate of its own presents the gateway's, to every name)
    assert not any("certificate" in p for p in found)


@pytest.mark.parametrize(
    ("pattern", "host", "ingress", "route"),
    [
        ("foo.bar.com", "foo.bar.com", True, True),
        ("foo.bar.com", "FOO.bar.com.", True, True),
        ("*.foo.com", "bar.foo.com", True, True),
        ("*.foo.com", "baz.bar.foo.com", False, True),
        ("*.foo.com", "foo.com", False, False),
        ("*.a.example", "b.example", False, False),
        ("*.a.example", "xa.example", False, False),
    ],
)
def test_wildcard_hostnames_follow_each_api(
    pattern: str, host: str, ingress: bool, route: bool
) -> None:
    assert matches(pattern, host, RouteSemantics.INGRESS) is ingress
    assert matches(pattern, host, RouteSemantics.HTTP_ROUTE) is route


@pytest.mark.parametrize(
    "body",
    [
        {"name": "X-A", "value": "line\n    option httpclose"},
        {"name": "X-A#x", "value": "v"},
        {"name": "X-A'", "value": "v"},
    ],
)
def test_a_header_that_could_start_a_new_configuration_line_is_refused(body: dict) -> None:
    with pytest.raises(ValidationError):
        HeaderMatch.model_validate(body)


def test_hostnames_are_dns_names_or_wildcards() -> None:
    HTTPRoute(listeners=("web",), hostnames=("*.a.example", "B.example"))
    with pytest.raises(ValidationError):
        HTTPRoute(listeners=("web",), hostnames=("a.example v0",))


def test_a_prefix_replacement_needs_one_prefix_match_and_excludes_a_rewrite() -> None:
    def config(**rule: object) -> GatewayConfig:
        return GatewayConfig.model_validate({
            "listeners": [{"name": "web", "address": "192.0.2.10", "port": 80, "protocol": "HTTP"}],
            "httpRoutes": [{"listeners": ["web"], "hostnames": ["a.example"], "rules": [rule]}],
        })  # fmt: skip

    exact = {"matches": [{"path": {"type": "Exact", "value": "/a"}}]}
    both = {"matches": [{"path": {"value": "/a"}}, {"path": {"value": "/b"}}]}
    prefix = {"redirect": {"replacePrefixMatch": "/b"}}
    (why,) = problems(config(**exact, **prefix))
    assert "rules[0]: replacePrefixMatch needs every match" in why
    assert problems(config(**both, rewrite={"replacePrefixMatch": ""}, backends=[]))
    assert problems(config(matches=[{"path": {"value": "/a"}}], **prefix)) == []
    assert problems(config(**prefix)) == []  # no matches: the prefix '/'
    (why,) = problems(config(redirect={"hostname": "b.example"}, rewrite={"path": "/x"}))
    assert "a redirect and a rewrite exclude each other" in why
    with pytest.raises(ValidationError, match="either path or replacePrefixMatch"):
        config(rewrite={"path": "/x", "replacePrefixMatch": "/y"})
    with pytest.raises(ValidationError, match="must be empty or start with '/'"):
        config(redirect={"replacePrefixMatch": "x"})


def test_a_missing_backend_reference_needs_no_backend() -> None:
    cfg = GatewayConfig(
        listeners=(_http(),),
        http_routes=(
            HTTPRoute(
                listeners=("web",),
                hostnames=("a.example",),
                rules=(HTTPRule(backends=(BackendRef(backend="gone", missing=True),)),),
            ),
        ),
    )
    assert problems(cfg) == []


def test_problems_after_a_sound_config_say_what_the_whole_check_says() -> None:
    # Given the config found sound before, only the routes added are looked at; whatever
    # the change, the answer is the whole check's.
    kept = ingress("kept", "a.example", [(PathType.PREFIX, "/", "a")])
    sound = GatewayConfig(
        listeners=(listener(), listener("tcp", 81, Protocol.TCP)),
        backends=(backend("a"), backend("b"), backend("t")),
        http_routes=(kept,),
        tcp_routes=(StreamRoute(listeners=("tcp",), backends=(BackendRef(backend="t"),)),),
    )
    assert problems(sound) == []
    added = ingress("added", "b.example", [(PathType.PREFIX, "/", "b")])
    changes = {
        "a sound route added": {"http_routes": (kept, added)},
        "a route to no backend": {
            "http_routes": (kept, ingress("x", "x.example", [(PathType.PREFIX, "/", "gone")]))
        },
        "a route to a TCP route's backend": {
            "http_routes": (kept, ingress("x", "x.example", [(PathType.PREFIX, "/", "t")]))
        },
        "a route on no listener": {
            "http_routes": (kept, ingress("x", "x.example", [(PathType.PREFIX, "/", "b")], ("no",)))
        },
        "the kept route's backend removed": {"backends": (backend("b"), backend("t"))},
        "the kept route's listener now TCP": {
            "listeners": (listener(protocol=Protocol.TCP), listener("tcp", 81, Protocol.TCP))
        },
    }
    for what, update in changes.items():
        config = sound.model_copy(update=update)
        assert problems(config, sound) == problems(config), what
    assert problems(sound.model_copy(update=changes["a sound route added"]), sound) == []
    assert problems(sound.model_copy(update=changes["a route to no backend"]), sound)


def test_changed_objects_are_those_not_held_as_the_same_objects_wherever_they_are() -> None:
    a, b, c, d = (backend(n) for n in "abcd")
    b_copy = backend("b")  # equal, another object: removed and added
    assert changed_objects((a, b, c), (a, b, c)) == ([], [])
    assert changed_objects((a, b, c), (a, b_copy, d, c)) == ([b_copy, d], [b])
    assert changed_objects((a, b, c), (d, a, b, c)) == ([d], [])
    assert changed_objects((a, b, c), (a, b)) == ([], [c])
    assert changed_objects((a, b), (b, a)) == ([], [])
    assert changed_objects((), (a,)) == ([a], [])
