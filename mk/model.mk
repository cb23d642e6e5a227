# Model check (issue 26): the Spin model of the conflict-checked cutover
# protocol (shared/devstack/standin/publisher/model/cutover.pml), checked
# exhaustively at a small scope as it is and once per removed clause of the
# publisher's check (each must produce a counterexample). Needs spin (the
# Debian package; .ci/run installs it) and gcc. Part of make test.
.PHONY: model-check
model-check: ## model-check the cutover protocol with Spin (every clause removed must give a counterexample)
	@mk/need.sh model-check go spin gcc
	BCC_MODEL_CHECK=1 $(GO) test -count=1 -timeout 30m ./shared/devstack/standin/publisher/model/

test: model-check
