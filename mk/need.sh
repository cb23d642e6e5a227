#!/usr/bin/env bash
# need: check that the tools a make target uses are installed; print one
# line per missing tool naming it and saying how to get it, and fail.
#   mk/need.sh <target> <tool>...    tools: go cc node npm cfn-lint moto_server compose spin gcc
set -uo pipefail
target="$1"; shift
node_min=20
missing=0
say() { echo "$target: $*" >&2; missing=1; }
for tool in "$@"; do
	case "$tool" in
	go)
		command -v go >/dev/null || say "needs Go 1.26 or newer (go is not in PATH): install it from go.dev/dl or your package manager"
		;;
	cc)
		# The race detector needs cgo, so the C compiler Go would use
		# (go env CC: gcc, or clang on macOS; $CC when set).
		cc="$(go env CC 2>/dev/null)"; cc="${cc:-${CC:-gcc}}"
		command -v "${cc%% *}" >/dev/null || say "needs a C compiler for Go's race detector (cgo; '${cc%% *}' is not in PATH): apt-get install gcc, xcode-select --install on macOS, or set CC"
		;;
	node)
		if ! command -v node >/dev/null; then
			say "needs Node $node_min or newer (node is not in PATH; 22 LTS recommended): install it from nodejs.org, with your package manager (brew install node, apt-get install nodejs npm) or a version manager (nvm install 22)"
		else
			v="$(node -p 'process.versions.node' 2>/dev/null || echo 0)"
			if [ "${v%%.*}" -lt "$node_min" ] 2>/dev/null; then
				say "needs Node $node_min or newer, this machine's node is $v: install Node 22 LTS (nodejs.org, brew install node@22, nvm install 22)"
			fi
		fi
		;;
	npm)
		command -v npm >/dev/null || say "needs npm (npm is not in PATH; it comes with Node: apt-get install npm on Debian)"
		;;
	cfn-lint)
		command -v cfn-lint >/dev/null || say "needs cfn-lint (cfn-lint is not in PATH; TestCfnLintIsClean runs it): pip install cfn-lint, brew install cfn-lint or pipx install cfn-lint"
		;;
	moto_server)
		command -v moto_server >/dev/null || say "needs moto_server (moto 5 with its server extra, not in PATH): pip install 'moto[server]' or pipx install 'moto[server]'"
		;;
	spin)
		command -v spin >/dev/null || say "needs spin (the Spin model checker, not in PATH; make model-check checks the cutover protocol with it): apt-get install spin or brew install spin"
		;;
	gcc)
		command -v gcc >/dev/null || say "needs gcc (not in PATH; spin's verifiers are C programs compiled with it): apt-get install gcc, xcode-select --install on macOS"
		;;
	compose)
		compose="${INFRA_COMPOSE:-docker compose}"
		if ! command -v "${compose%% *}" >/dev/null; then
			say "needs Docker with Compose ('${compose%% *}' is not in PATH): install Docker Desktop or Docker Engine with the compose plugin, or set INFRA_COMPOSE=docker-compose"
		elif ! $compose version >/dev/null 2>&1; then
			say "needs Docker Compose ('$compose version' failed): install the compose plugin (apt-get install docker-compose-plugin) or set INFRA_COMPOSE=docker-compose"
		fi
		;;
	*)
		command -v "$tool" >/dev/null || say "needs $tool (not in PATH)"
		;;
	esac
done
exit $missing
