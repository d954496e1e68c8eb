"""The runtime API's conversation, sans-I/O: one apply's commands written on one
admin-socket connection in interactive mode, and the text HAProxy sends back split into
each command's answer. The answers below are HAProxy 2.6.12's, recorded from a real one."""

from __future__ import annotations

from teapot_lb.gateway import runtime
from teapot_lb.gateway.plan import AddMapEntry, ServerState, SetCertificate, SetServer

PEM = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"

SERVER = SetServer("be_a", "s1", ServerState.READY, "192.0.2.12", 81)
ROTATED = SetCertificate("/state/certs/a.pem", PEM)
MAPPED = AddMapEntry("/state/maps/names.map", "a.example", "cert_a")


def _commands(*actions: runtime.RuntimeAction) -> list[runtime.Command]:
    return [c for action in actions for c in runtime.commands(action)]


def test_a_conversation_is_interactive_mode_each_command_then_quit() -> None:
    written = runtime.conversation(_commands(MAPPED, ROTATED)).decode()
    assert written == (
        "prompt\n"
        "add map /state/maps/names.map a.example cert_a\n"
        # the payload ends at the empty line after its last line
        "set ssl cert /state/certs/a.pem <<\n"
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n\n"
        "commit ssl cert /state/certs/a.pem\n"
        "quit\n"
    )


def test_the_answers_split_back_to_each_command_without_the_payload_prompts() -> None:
    commands = _commands(SERVER, ROTATED, MAPPED)
    received = (
        "\n> "  # prompt's own answer
        "IP changed from '192.0.2.10' to '192.0.2.12', port changed from '80' to '81' "
        "by 'stats socket command'\n\n> "
        "\n> "  # set server state: no answer
        "+ + + + Transaction created for certificate /state/certs/a.pem!\n\n> "
        "Committing /state/certs/a.pem\nSuccess!\n\n> "
        "\n> "  # add map: no answer
    )
    found = runtime.answers(commands, received)
    assert [a.command for a in found] == commands
    assert [a.text for a in found] == [
        "IP changed from '192.0.2.10' to '192.0.2.12', port changed from '80' to '81' "
        "by 'stats socket command'\n",
        "",
        "Transaction created for certificate /state/certs/a.pem!\n",
        "Committing /state/certs/a.pem\nSuccess!\n",
        "",
    ]
    assert all(a.ok for a in found)
    assert runtime.refusal(found) is None


def test_a_failure_in_the_middle_is_that_commands_with_its_text() -> None:
    other = SetServer("be_gone", "s1", ServerState.MAINT)
    commands = _commands(SERVER, other, MAPPED)
    received = (
        "\n> "
        "IP changed from '192.0.2.10' to '192.0.2.12' by 'stats socket command'\n\n> "
        "\n> "
        "No such backend.\n\n> "
        "\n> "
    )
    found = runtime.answers(commands, received)
    assert [a.ok for a in found] == [True, True, False, True]
    assert runtime.refusal(found) == (
        "HAProxy refused 'set server be_gone/s1 state maint': No such backend."
    )


def test_a_refused_payload_command_is_named_by_its_first_line_and_later_failures_counted() -> None:
    commands = _commands(ROTATED)
    received = (
        "\n> "
        "+ + + + Transaction updated for certificate /state/certs/b.pem!\n\n> "
        "The ongoing transaction is about '/state/certs/b.pem' but you are trying to set "
        "'/state/certs/a.pem'\nCan't commit /state/certs/a.pem!\n\n> "
    )
    found = runtime.answers(commands, received)
    assert [a.ok for a in found] == [True, False]
    why = runtime.refusal(found)
    assert why is not None
    assert why.startswith("HAProxy refused 'commit ssl cert /state/certs/a.pem': The ongoing")


def test_a_connection_cut_short_leaves_the_rest_unanswered() -> None:
    commands = _commands(SERVER, MAPPED)
    # the state command's answer had begun when the connection ended
    received = "\n> IP changed from '192.0.2.10' to '192.0.2.12'\n\n> partial"
    found = runtime.answers(commands, received)
    assert [a.text is not None for a in found] == [True, False, False]
    assert runtime.refusal(found) == (
        "no answer to 'set server be_a/s1 state ready' (the connection ended after 1 of 3 "
        "answers) (and 1 more of the 3 commands failed)"
    )


def test_nothing_received_is_every_command_unanswered() -> None:
    found = runtime.answers(_commands(MAPPED), "")
    assert [a.ok for a in found] == [False]
