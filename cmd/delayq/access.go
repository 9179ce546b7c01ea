package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/spf13/pflag"

	"github.com/delayq/delayq/auth"
	"github.com/delayq/delayq/transports/webhook"
)

// tokensEnv holds API tokens inline, as a tokens file would: YAML or JSON.
const tokensEnv = "DELAYQ_TOKENS"

// accessFlags are the serve flags of access control: API tokens, TLS and
// webhook destinations.
type accessFlags struct {
	// TokensFile lists API tokens (YAML or JSON).
	TokensFile string
	// ProtectMetrics makes /metrics need an admin token.
	ProtectMetrics bool
	// TLSCert and TLSKey are the HTTP listener's certificate and key files.
	TLSCert, TLSKey string
	// WebhookAllow and WebhookDeny are the webhook destination lists.
	WebhookAllow, WebhookDeny []string
}

// addFlags defines the access flags on fs, bound to f.
func (f *accessFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.TokensFile, "tokens-file", f.TokensFile, "YAML or JSON list of API tokens ({name, token or sha256, scopes, topics}); also "+tokensEnv+" inline; none leaves the API open")
	fs.BoolVar(&f.ProtectMetrics, "metrics-auth", f.ProtectMetrics, "with tokens, /metrics needs an admin token")
	fs.StringVar(&f.TLSCert, "tls-cert", f.TLSCert, "PEM certificate file of the HTTP listener (with --tls-key)")
	fs.StringVar(&f.TLSKey, "tls-key", f.TLSKey, "PEM private key file of the HTTP listener (with --tls-cert)")
	fs.StringSliceVar(&f.WebhookAllow, "webhook-allow", f.WebhookAllow, "webhook destinations allowed, comma-separated host patterns (*.example.com) and CIDR ranges; when set, only these")
	fs.StringSliceVar(&f.WebhookDeny, "webhook-deny", f.WebhookDeny, "webhook destinations denied, comma-separated host patterns and CIDR ranges (link-local and metadata addresses are denied unless allowed)")
}

// access is what the access flags load to.
type access struct {
	tokens       *auth.Tokens
	tls          *tls.Config
	destinations *webhook.Destinations
	// tokensFileMode is the tokens file's mode when group or others may
	// read or write it (logStart warns), else zero.
	tokensFileMode os.FileMode
	// tokensFile is the tokens file's path, for that warning.
	tokensFile string
}

// load reads the tokens file and DELAYQ_TOKENS, the certificate and the
// destination lists. Errors name the flag or variable.
func (f *accessFlags) load(lookupEnv func(string) (string, bool)) (*access, error) {
	a := &access{}
	var list []auth.Token
	if f.TokensFile != "" {
		l, err := auth.LoadFile(f.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("--tokens-file: %w", err)
		}
		list = append(list, l...)
		if fi, err := os.Stat(f.TokensFile); err == nil && fi.Mode().Perm()&0o066 != 0 {
			a.tokensFile, a.tokensFileMode = f.TokensFile, fi.Mode().Perm()
		}
	}
	if v, ok := lookupEnv(tokensEnv); ok && v != "" {
		l, err := auth.ParseTokens([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tokensEnv, err)
		}
		list = append(list, l...)
	}
	var err error
	if a.tokens, err = auth.NewTokens(list); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	switch {
	case (f.TLSCert == "") != (f.TLSKey == ""):
		return nil, errors.New("--tls-cert and --tls-key go together")
	case f.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(f.TLSCert, f.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		a.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if a.destinations, err = webhook.ParseDestinations(f.WebhookAllow, f.WebhookDeny); err != nil {
		return nil, fmt.Errorf("--webhook-allow, --webhook-deny: %w", err)
	}
	return a, nil
}

// serve serves srv on ln, with TLS when configured.
func (a *access) serve(srv *http.Server, ln net.Listener) error {
	if a.tls == nil {
		return srv.Serve(ln)
	}
	srv.TLSConfig = a.tls
	return srv.ServeTLS(ln, "", "")
}

// logStart says how the API is protected, and warns when it is open beyond
// loopback or when group or others may read or write the tokens file (as
// ssh warns of a key file: a secret in it lets whoever reads it in, and
// whoever writes it adds a token).
func (a *access) logStart(log *slog.Logger, addr net.Addr) {
	if a.tokensFileMode != 0 {
		log.Warn("tokens file may be read or written by group or others: chmod 600 it", "file", a.tokensFile, "mode", fmt.Sprintf("%#o", a.tokensFileMode))
	}
	if a.tokens.Len() > 0 {
		log.Info("http api tokens required", "tokens", a.tokens.Len())
		return
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		log.Warn("http api is open: no API tokens configured (--tokens-file or "+tokensEnv+") while listening beyond loopback", "addr", addr.String())
	}
}
