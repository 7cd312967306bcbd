"""Which runs of a sweep count (sweeps/outcomes)."""

from nbsubagents._sweeps.outcomes import excluded_reason, retry_reason


def test_the_agents_own_ends_count_and_the_infrastructures_do_not():
    for reason in ("stop", "timeout", "loop", "budget:tool_calls", "schema", "exit_code", "length"):
        assert excluded_reason({"status": "failed", "stop_reason": reason}) is None, reason
    assert excluded_reason({"status": "failed", "stop_reason": "not_started"}) == "never started"
    assert excluded_reason({"status": "failed", "stop_reason": "provider_error"}) == "the model provider failed"
    assert excluded_reason({"status": "failed", "stop_reason": "worker_lost"}) == "its Dask worker was lost"
    assert excluded_reason({"status": "aborted", "stop_reason": "cancelled"}) == "cancelled"
    assert excluded_reason({"status": "running", "stop_reason": None}) == "not ended yet"


def test_only_what_another_attempt_may_cure_is_retried():
    assert retry_reason({"status": "failed", "stop_reason": "provider_error"}) == "the model provider failed"
    assert retry_reason({"status": "failed", "stop_reason": "no_reply"}) is not None
    for reason in ("cancelled", "not_started", "timeout", "stop", None):
        assert retry_reason({"status": "failed", "stop_reason": reason}) is None, reason
