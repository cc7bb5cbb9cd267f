#!/usr/bin/env bash
# Deploys every function of the functions table (go run ./functions/cmd/functable)
# as a 2nd gen Cloud Function with a Firestore (Eventarc) trigger and --retry,
# then the Firestore rules and indexes (with the TTL policy on
# triggerEvents.expireAt).
#
# Usage: ./scripts/deploy.sh [flags]
#   --project ID            or GOOGLE_CLOUD_PROJECT / CLOUDSDK_CORE_PROJECT
#   --region R              function region, or FIREONCE_REGION (e.g. us-central1)
#   --trigger-location L    the Firestore database location, or FIREONCE_TRIGGER_LOCATION (e.g. nam5)
#   --database D            Firestore database, or FIREONCE_DATABASE (default "(default)")
#   --service-account SA    run-time service account
#   --memory M              e.g. 256Mi
#   --timeout T             e.g. 540s (the guard's lease must be at least this long)
#   --set-env-vars K=V,...  environment for the functions (repeatable)
#   --only NAME             deploy one function
#   --skip-firestore        do not deploy rules and indexes
#   --dry-run               print the exact commands, run nothing
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'deploy.sh: %s\n' "$*" >&2; exit 2; }

project=${GOOGLE_CLOUD_PROJECT:-${CLOUDSDK_CORE_PROJECT:-}}
region=${FIREONCE_REGION:-}
trigger_location=${FIREONCE_TRIGGER_LOCATION:-}
database=${FIREONCE_DATABASE:-(default)}
service_account="" memory="" timeout="" only="" dry_run=0 skip_firestore=0
env_vars=()

need() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --project) need "$@"; project=$2; shift 2 ;;
    --region) need "$@"; region=$2; shift 2 ;;
    --trigger-location) need "$@"; trigger_location=$2; shift 2 ;;
    --database) need "$@"; database=$2; shift 2 ;;
    --service-account) need "$@"; service_account=$2; shift 2 ;;
    --memory) need "$@"; memory=$2; shift 2 ;;
    --timeout) need "$@"; timeout=$2; shift 2 ;;
    --set-env-vars) need "$@"; env_vars+=("$2"); shift 2 ;;
    --only) need "$@"; only=$2; shift 2 ;;
    --skip-firestore) skip_firestore=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

[ -n "$project" ] || die "no project: pass --project or set GOOGLE_CLOUD_PROJECT"
[ -n "$region" ] || die "no region: pass --region (e.g. us-central1) or set FIREONCE_REGION"
[ -n "$trigger_location" ] || die "no trigger location: pass --trigger-location with the Firestore database's location (e.g. nam5, eur3, us-central1) or set FIREONCE_TRIGGER_LOCATION; 'gcloud firestore databases describe' shows it"
[ -n "$database" ] || die "empty --database"

table=$(go run ./functions/cmd/functable -format=tsv) || die "could not read the functions table"

# run prints the command shell-quoted, and runs it unless --dry-run.
run() {
  local quoted
  quoted=$(printf '%q ' "$@")
  printf '%s\n' "${quoted% }"
  if [ "$dry_run" -eq 0 ]; then
    "$@"
  fi
}

# The functions write to the database their triggers listen on.
if [ "$database" != "(default)" ]; then
  env_vars+=("FIREONCE_DATABASE=$database")
fi

found=0
while IFS=$'\t' read -r name event_type document; do
  [ -n "$name" ] || continue
  if [ -n "$only" ] && [ "$name" != "$only" ]; then
    continue
  fi
  found=1
  args=(gcloud functions deploy "$name" --gen2 --runtime=go126
    "--project=$project" "--region=$region" --source=. "--entry-point=$name"
    "--trigger-location=$trigger_location"
    "--trigger-event-filters=type=$event_type"
    "--trigger-event-filters=database=$database"
    "--trigger-event-filters-path-pattern=document=$document"
    --retry)
  [ -n "$service_account" ] && args+=("--service-account=$service_account")
  [ -n "$memory" ] && args+=("--memory=$memory")
  [ -n "$timeout" ] && args+=("--timeout=$timeout")
  if [ ${#env_vars[@]} -gt 0 ]; then
    args+=("--set-env-vars=$(IFS=,; printf '%s' "${env_vars[*]}")")
  fi
  run "${args[@]}"
done <<<"$table"

if [ "$found" -eq 0 ]; then
  die "no function named '$only' in the functions table; have: $(cut -f1 <<<"$table" | tr '\n' ' ')"
fi

if [ "$skip_firestore" -eq 1 ] || [ -n "$only" ]; then
  exit 0
fi
rules_cmd=(firebase deploy --only firestore "--project=$project")
if [ "$dry_run" -eq 1 ] || command -v firebase >/dev/null 2>&1; then
  run "${rules_cmd[@]}"
else
  printf 'deploy.sh: the Firebase CLI is not installed; deploy the rules, indexes and TTL policy with:\n  npm install -g firebase-tools && %s\n' \
    "$(printf '%q ' "${rules_cmd[@]}")" >&2
fi
