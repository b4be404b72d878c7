#!/usr/bin/env bash
# tidy-modules.sh: `go mod tidy` in every module of the workspace (go.work),
# docs/modules.md. `go mod tidy` works on one module and ignores go.work, so
# a module that requires another module of this repository at a version not
# yet published could not be tidied: each is tidied with temporary replace
# directives to the other modules' directories, removed afterwards. The
# repository's own modules are then required at $ONCEBOX_VERSION (default:
# the version the root module is required at today, else
# v0.0.0-00010101000000-000000000000, Go's placeholder for a module that
# was never published); scripts/release-version.sh sets it at a release.
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"

mapfile -t mods < <("$GO" list -m -f '{{.Path}} {{.Dir}}')
root_path="${mods[0]%% *}"
version="${ONCEBOX_VERSION:-}"
if [ -z "$version" ]; then
	for m in "${mods[@]:1}"; do
		version="$(GOWORK=off "$GO" mod edit -json "${m#* }/go.mod" |
			awk -v p="\"$root_path\"" '$1 == "\"Path\":" && $2 == p"," {getline; gsub(/[",]/, "", $2); print $2; exit}')"
		[ -n "$version" ] && break
	done
	version="${version:-v0.0.0-00010101000000-000000000000}"
fi

for m in "${mods[@]}"; do
	path="${m%% *}" dir="${m#* }"
	replaces=() drops=()
	for o in "${mods[@]}"; do
		[ "$o" = "$m" ] && continue
		rel="$(realpath --relative-to="$dir" "${o#* }")"
		case "$rel" in .*) ;; *) rel="./$rel" ;; esac
		replaces+=("-replace=${o%% *}=$rel")
		drops+=("-dropreplace=${o%% *}")
	done
	echo "tidy: $path"
	(
		cd "$dir"
		GOWORK=off "$GO" mod edit "${replaces[@]}"
		trap 'GOWORK=off "$GO" mod edit "${drops[@]}"' EXIT
		GOWORK=off "$GO" mod tidy
		for o in "${mods[@]}"; do
			if grep -qE "^[[:space:]]*(require[[:space:]]+)?${o%% *} " go.mod; then
				GOWORK=off "$GO" mod edit -require="${o%% *}@$version"
			fi
		done
	)
done
# Not `go work sync`: it would raise each module's requirements to the
# versions the whole workspace selects (the core would require what the
# examples need).
