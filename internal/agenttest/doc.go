// Package agenttest holds the integration tests that run real ACP agents
// from npm (Claude Code, Codex, Pi) through `runnel serve`, against the
// scripted model server, inside a network namespace that has only
// loopback: the proof that the ACP harness works with what those agents
// really send (DESIGN §7, §10).
//
// The agents are installed once, outside the tests, with `runnel agents
// install claude codex pi` into a directory named by
// RUNNEL_TEST_AGENTS_DIR; .ci/run does that. Without the variable every
// test here is skipped, saying so; with it, an agent that is missing
// fails its tests. The package has no code of its own.
package agenttest
