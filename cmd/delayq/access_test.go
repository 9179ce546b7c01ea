package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir and returns their paths and a pool trusting it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "delayq test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLSAndTokens runs serve with TLS and a tokens file: a client that
// trusts the certificate reaches the API with a token, is refused without
// one, and the token never shows in the log.
func TestServeTLSAndTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	const secret = "serve-test-secret-0123456789"
	tokens := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte("- name: ci\n  token: "+secret+"\n  scopes: [push]\n"), 0o600))

	p := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off", "--log-level", "debug",
		"--tls-cert", certFile, "--tls-key", keyFile, "--tokens-file", tokens)
	base := strings.Replace(p.HTTPURL, "http://", "https://", 1)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(client.CloseIdleConnections)

	call := func(secret string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/jobs", strings.NewReader(`{"topic": "mail", "delay": "1h"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		res, err := client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	status, body := call(secret)
	require.Equal(t, http.StatusCreated, status, body)
	status, body = call("")
	require.Equal(t, http.StatusUnauthorized, status, body)
	require.Contains(t, body, `"unauthenticated"`)

	// Plain HTTP is not served.
	res, err := http.Get(p.HTTPURL + "/healthz")
	if err == nil {
		_ = res.Body.Close()
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
	}
	require.NotContains(t, p.log(), secret)
}

// TestServeAccessFlagErrors checks that bad access flags stop serve with a
// message naming them.
func TestServeAccessFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", filepath.Join(dir, "c.pem")}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", filepath.Join(dir, "c.pem"), "--tls-key", filepath.Join(dir, "k.pem")}, "--tls-cert, --tls-key"},
		{[]string{"--tokens-file", filepath.Join(dir, "none.yaml")}, "--tokens-file"},
		{[]string{"--webhook-deny", "10.0.0.0/33"}, "--webhook-deny"},
	} {
		code, _, stderr := runCLI(t, append([]string{"serve", "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off"}, tc.args...)...)
		require.NotZero(t, code, tc.args)
		require.Contains(t, stderr, tc.want, tc.args)
	}
}

// TestTokensFileModeWarning checks that serve warns at start, as ssh does
// for a key, when group or others may read or write the tokens file, and
// says nothing of a file only its owner reads.
func TestTokensFileModeWarning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o400, false}, {0o644, true}, {0o640, true}, {0o604, true}, {0o620, true}} {
		file := filepath.Join(dir, fmt.Sprintf("tokens-%o.yaml", tc.mode))
		require.NoError(t, os.WriteFile(file, []byte("- name: ops\n  token: mode-test-secret-0123456789\n  scopes: [admin]\n"), 0o600))
		require.NoError(t, os.Chmod(file, tc.mode)) // past the umask
		f := accessFlags{TokensFile: file}
		a, err := f.load(func(string) (string, bool) { return "", false })
		require.NoError(t, err)
		var buf bytes.Buffer
		a.logStart(slog.New(slog.NewTextHandler(&buf, nil)), addr)
		if !tc.warn {
			require.NotContains(t, buf.String(), "level=WARN", "mode %#o", tc.mode)
			continue
		}
		require.Contains(t, buf.String(), `level=WARN msg="tokens file may be read or written by group or others: chmod 600 it"`, "mode %#o", tc.mode)
		require.Contains(t, buf.String(), fmt.Sprintf("file=%s mode=%#o", file, tc.mode))
		require.NotContains(t, buf.String(), "mode-test-secret")
	}
}
