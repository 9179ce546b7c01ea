#!/bin/sh
# Renders alertmanager.yml: replaces each ${ALERT_...} in IN with the
# variable of the environment and writes OUT. The compose files'
# alertmanager service runs it before Alertmanager, which expands no
# variables itself; deployments/validate runs it with sample values.
# Values must not hold '|' or '&' (sed's delimiter and match).
#
#   alertmanager-render.sh IN OUT
set -eu
in=$1
out=$2
for v in ALERT_SMTP_HOST ALERT_SMTP_FROM ALERT_SMTP_USER ALERT_MAIL_TO ALERT_WEBHOOK_URL; do
	eval "val=\${$v:?set $v (docs/operations.md, Alerts by mail and chat)}"
	case $val in *'|'* | *'&'*) echo "$v must not hold | or &" >&2; exit 2 ;; esac
done
sed -e "s|\${ALERT_SMTP_HOST}|$ALERT_SMTP_HOST|g" \
	-e "s|\${ALERT_SMTP_FROM}|$ALERT_SMTP_FROM|g" \
	-e "s|\${ALERT_SMTP_USER}|$ALERT_SMTP_USER|g" \
	-e "s|\${ALERT_MAIL_TO}|$ALERT_MAIL_TO|g" \
	-e "s|\${ALERT_WEBHOOK_URL}|$ALERT_WEBHOOK_URL|g" \
	"$in" >"$out"
