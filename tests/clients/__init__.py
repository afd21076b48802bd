"""Real coding agents (Claude Code, Codex, opencode, aider, mini-swe-agent) driven through
``contextfold proxy`` against scripted upstreams, and the checks applied to what they send.

Issues 26 and 27 ("Test with real clients"): every client runs a multi-step plan decided by a
scripted upstream that reads each request, once directly (the control: the driver and the
script work) and once through the proxy at a small window; every upstream request is checked
against the invariants of :mod:`tests.clients.invariants`.
"""
