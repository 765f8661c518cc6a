#!/usr/bin/env bash
# build.sh [DIR] - build the control-plane binaries used by the miglayout test harness.
#
# Everything comes from the Go module proxy (no Docker, no release tarballs):
#   etcd                      <- go.etcd.io/etcd/server/v3 (module root is package main)
#   kube-apiserver, kube-scheduler, kube-controller-manager, kubectl
#                             <- k8s.io/kubernetes/cmd/... built inside a scratch module
#
# DIR defaults to $MIGLAYOUT_TESTBIN, else ~/.cache/miglayout/testbin/v$K8S_VERSION-etcd$ETCD_VERSION
# (the place test/harness.BinDir looks). A binary that already reports the pinned version is
# skipped, so a second run takes well under a second.
# Cold cache on 2 cores: 10-15 min in all (kube-apiserver ~7 min), Go build cache +4-5 GB,
# module cache +1 GB.
set -euo pipefail

# ---- pinned versions (keep in sync with test/harness/binaries.go) ----
K8S_VERSION=1.37.2
ETCD_VERSION=3.7.3

log() { echo "testbin: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

DIR=${1:-${MIGLAYOUT_TESTBIN:-$HOME/.cache/miglayout/testbin/v$K8S_VERSION-etcd$ETCD_VERSION}}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# One build per DIR at a time (two `make test` runs side by side would otherwise rewrite the
# scratch modules under each other); the second waits and then finds everything present.
if command -v flock >/dev/null; then
  exec 9>"$DIR/.build.lock"
  flock -n 9 || { log "another build holds $DIR/.build.lock, waiting"; flock 9; }
  # Temporary binaries of a build that was killed (go_build): tens to hundreds of MB each.
  # With the lock held, no build of this DIR is writing one.
  find "$DIR" -maxdepth 1 -type f -name '*.tmp.*' -delete
fi

minor=${K8S_VERSION#*.}; minor=${minor%%.*}
stage_ver="v0.${K8S_VERSION#*.}"          # 1.37.2 -> v0.37.2

# Static binaries, no workspace (GOTOOLCHAIN is left as it is: a scratch module whose
# go line asks for a newer Go fetches it). Only inside this script: the
# project itself needs cgo (go-nvml).
export CGO_ENABLED=0 GOWORK=off GOFLAGS="-buildvcs=false"
unset GOOS GOARCH

# has_version BIN WANT: true if BIN exists and its version output mentions WANT.
has_version() {
  [[ -x "$1" ]] || return 1
  local out
  if [[ "$(basename "$1")" == kubectl ]]; then
    out=$("$1" version --client 2>/dev/null || true)
  else
    out=$("$1" --version 2>/dev/null || true)
  fi
  [[ "$out" == *"$2"* ]]
}

# Build into a temporary name and rename, so an interrupted build never leaves a
# half-written binary behind that a later run might try to execute.
# go_build OUT PKG [go build flags...]
go_build() {
  local out=$1 pkg=$2; shift 2
  go build -trimpath "$@" -o "$out.tmp.$$" "$pkg"
  mv -f "$out.tmp.$$" "$out"
}

command -v go >/dev/null || die "go not found in PATH"

# The scratch modules' go.mod and go.sum for the pinned versions are committed beside this
# script (resolved once with go mod tidy; checksums from sum.golang.org), so every machine
# builds the same module versions and a module mirror without the checksum database will do.
# seed_module NAME DEST: copy modules/NAME.go.{mod,sum} into DEST; false if not committed.
PINNED="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/modules"
seed_module() {
  [[ -f "$PINNED/$1.go.mod" && -f "$PINNED/$1.go.sum" ]] || return 1
  cp "$PINNED/$1.go.mod" "$2/go.mod"
  cp "$PINNED/$1.go.sum" "$2/go.sum"
}

# ---------------------------------------------------------------- etcd
if has_version "$DIR/etcd" "etcd Version: $ETCD_VERSION"; then
  log "etcd $ETCD_VERSION present, skipping"
else
  m="$DIR/.mod-etcd"; mkdir -p "$m"
  seed_module "etcd-v$ETCD_VERSION" "$m" || cat >"$m/go.mod" <<EOM
module testbin/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
EOM
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$m/tools.go"
  log "resolving etcd $ETCD_VERSION modules"
  (cd "$m" && go mod tidy)
  log "building etcd $ETCD_VERSION (about 1 min on 2 cores, first time only)"
  (cd "$m" && go_build "$DIR/etcd" go.etcd.io/etcd/server/v3 -ldflags "-s -w")
  has_version "$DIR/etcd" "etcd Version: $ETCD_VERSION" || die "built etcd does not report $ETCD_VERSION"
fi

# ---------------------------------------------------------------- kubernetes
need=()
for c in kube-apiserver kube-scheduler kube-controller-manager; do
  has_version "$DIR/$c" "Kubernetes v$K8S_VERSION" || need+=("$c")
done
has_version "$DIR/kubectl" "Client Version: v$K8S_VERSION" || need+=(kubectl)
if [[ ${#need[@]} -eq 0 ]]; then
  log "kubernetes v$K8S_VERSION binaries present, skipping"
  log "binaries in $DIR"
  exit 0
fi

# k8s.io/kubernetes's own go.mod replaces its staging modules (k8s.io/api, k8s.io/client-go,
# ...) with ./staging/src/..., which Go ignores for a dependency. The scratch module re-adds
# each replace with the published v0.X.Y tag (list read from the real go.mod).
m="$DIR/.mod-k8s"; mkdir -p "$m"
log "resolving k8s.io/kubernetes v$K8S_VERSION modules"
if ! seed_module "k8s-v$K8S_VERSION" "$m"; then
  [[ -f "$m/go.mod" ]] || printf 'module testbin/k8s\n\ngo 1.26.0\n' >"$m/go.mod"
  kgomod=$(cd "$m" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
           sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
  [[ -f "$kgomod" ]] || die "could not download k8s.io/kubernetes@v$K8S_VERSION"
  {
    printf 'module testbin/k8s\n\ngo 1.26.0\n\ngodebug default=go1.26\n\nrequire k8s.io/kubernetes v%s\n\n' "$K8S_VERSION"
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$kgomod" | awk '{print $1}' |
      while read -r mod; do echo "replace $mod => $mod $stage_ver"; done
  } >"$m/go.mod"
fi
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for c in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"
  done
  printf ')\n'
} >"$m/tools.go"
(cd "$m" && go mod tidy)

# Same tags as hack/lib/golang.sh (release builds) plus version stamping, so that
# `kube-apiserver --version` and /version report v$K8S_VERSION, not v0.0.0-master.
ld="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
for c in "${need[@]}"; do
  case $c in
    kube-apiserver) hint="about 7 min" ;;
    *) hint="about 1-2 min" ;;
  esac
  log "building $c v$K8S_VERSION ($hint on 2 cores, first time only)"
  (cd "$m" && go_build "$DIR/$c" "k8s.io/kubernetes/cmd/$c" -tags selinux,notest,grpcnotrace -ldflags "$ld")
done
for c in kube-apiserver kube-scheduler kube-controller-manager; do
  has_version "$DIR/$c" "Kubernetes v$K8S_VERSION" || die "built $c does not report v$K8S_VERSION"
done
has_version "$DIR/kubectl" "Client Version: v$K8S_VERSION" || die "built kubectl does not report v$K8S_VERSION"
log "binaries in $DIR"
