"""The conditional-write self-test of S3 commit handlers decides only from a
definite answer of the store (the second create of one object: refused =
honoured, accepted = ignored), retries transport errors, and keeps no
verdict reached through a fault. Driven through a memory store whose
``put_if_absent`` misbehaves as a faulty network makes S3 look."""
from __future__ import annotations

import uuid

import pytest

from lance_ops.errors import UnsupportedFeatureError
from lance_ops.storage import ObjectStore
from lance_ops.storage import commit as handlers


@pytest.fixture
def handler(monkeypatch):
    monkeypatch.setattr(handlers, "_CONDITION_PROBES", {})
    monkeypatch.setattr(handlers.time, "sleep", lambda s: None)
    store = ObjectStore(f"memory://probe-{uuid.uuid4().hex}/t.lance")
    return handlers.ConditionalPutHandler(store)


def scripted(monkeypatch, handler, answers):
    """put_if_absent follows ``answers`` per call: "apply" (really create),
    "lost" (create, then the answer is lost: the retry says it exists),
    "ignore" (overwrite: a store ignoring the condition), or an exception."""
    store = handler.store
    calls = []

    def put(rel, data):
        what = answers[len(calls)] if len(calls) < len(answers) else "apply"
        calls.append(what)
        if isinstance(what, Exception):
            raise what
        if what == "ignore":
            store.fs.pipe_file(store.path(rel), data)
            return True
        exists = store.fs.exists(store.path(rel))
        if not exists:
            store.fs.pipe_file(store.path(rel), data)
        if what == "lost":
            return False
        return not exists

    monkeypatch.setattr(store, "put_if_absent", put)
    return calls


def test_a_lost_answer_of_the_first_create_is_no_verdict(monkeypatch, handler):
    """Before: "first create returned False" read as "conditions ignored",
    cached for the process -- every later commit refused."""
    calls = scripted(monkeypatch, handler, ["lost", "apply"])
    handler.check_conditional_writes()
    assert calls == ["lost", "apply"]  # the second create (refused) decided
    assert list(handlers._CONDITION_PROBES.values()) == [True]
    assert handler.put_if_not_exists("_versions/x.manifest", b"1") is True


def test_transport_errors_are_retried(monkeypatch, handler):
    calls = scripted(monkeypatch, handler, [ConnectionResetError("reset"), "apply", TimeoutError("slow"), "apply"])
    handler.check_conditional_writes()
    assert len(calls) == 4 and list(handlers._CONDITION_PROBES.values()) == [True]


def test_an_unreachable_store_keeps_no_verdict(monkeypatch, handler):
    scripted(monkeypatch, handler, [ConnectionResetError("reset")] * handlers.PROBE_ATTEMPTS)
    with pytest.raises(ConnectionResetError):
        handler.check_conditional_writes()
    assert handlers._CONDITION_PROBES == {}
    scripted(monkeypatch, handler, [])  # the network is back: the next commit probes again
    handler.check_conditional_writes()
    assert list(handlers._CONDITION_PROBES.values()) == [True]


def test_a_store_ignoring_the_condition_is_refused(monkeypatch, handler):
    scripted(monkeypatch, handler, ["apply", "ignore"])
    with pytest.raises(UnsupportedFeatureError, match="ignores conditional writes"):
        handler.check_conditional_writes()
    assert list(handlers._CONDITION_PROBES.values()) == [False]
    with pytest.raises(UnsupportedFeatureError):  # a definite verdict is kept
        handler.put_if_not_exists("_versions/x.manifest", b"1")


def test_the_probe_object_is_removed(monkeypatch, handler):
    scripted(monkeypatch, handler, [])
    handler.check_conditional_writes()
    assert not [p for p in handler.store.fs.find(handler.store.path("")) if "probe" in p]
