package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

func TestSign(t *testing.T) {
	t.Parallel()

	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"a","body":{"x":1}}`)

	h := hmac.New(sha256.New, []byte("s3cr3t"))
	h.Write([]byte("1700000000." + string(body)))
	want := "t=1700000000,v1=" + hex.EncodeToString(h.Sum(nil))
	require.Equal(t, want, Sign("s3cr3t", at, body))
}

func TestVerify(t *testing.T) {
	t.Parallel()

	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"a","body":{"x":1}}`)
	header := Sign("s3cr3t", at, body)

	t.Run("Valid", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, Verify("s3cr3t", header, body, at.Add(time.Minute), 5*time.Minute))
	})

	t.Run("TamperedBody", func(t *testing.T) {
		t.Parallel()
		tampered := []byte(strings.Replace(string(body), `"x":1`, `"x":2`, 1))
		require.ErrorIs(t, Verify("s3cr3t", header, tampered, at, 5*time.Minute), ErrSignatureMismatch)
	})

	t.Run("WrongSecret", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, Verify("other", header, body, at, 5*time.Minute), ErrSignatureMismatch)
	})

	t.Run("TamperedTimestamp", func(t *testing.T) {
		t.Parallel()
		h := strings.Replace(header, "t=1700000000", "t=1700000001", 1)
		require.ErrorIs(t, Verify("s3cr3t", h, body, at, 5*time.Minute), ErrSignatureMismatch)
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, Verify("s3cr3t", header, body, at.Add(6*time.Minute), 5*time.Minute), ErrSignatureExpired)
		require.ErrorIs(t, Verify("s3cr3t", header, body, at.Add(-6*time.Minute), 5*time.Minute), ErrSignatureExpired)
	})

	t.Run("NoTolerance", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, Verify("s3cr3t", header, body, at.Add(24*time.Hour), 0))
	})

	t.Run("RotatedSecrets", func(t *testing.T) {
		t.Parallel()
		old := Sign("old", at, body)
		_, oldSig, _ := strings.Cut(old, ",")
		h := header + "," + oldSig + ",v0=ignored"
		require.NoError(t, Verify("s3cr3t", h, body, at, time.Minute))
		require.NoError(t, Verify("old", h, body, at, time.Minute))
	})

	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()
		sig := strings.Split(header, ",")[1]
		for _, h := range []string{
			"",
			"garbage",
			"t=1700000000",
			sig,
			"t=abc," + sig,
			"t=-1," + sig,
			"t=1700000000,t=1700000000," + sig,
			"t=1700000000,v1=zz",
			"t=1700000000,v1=" + strings.Repeat("g", 64),
			strings.Repeat("x", maxSignatureHeaderLen+1),
		} {
			require.ErrorIs(t, Verify("s3cr3t", h, body, at, time.Minute), ErrSignatureMalformed, "header %q", h)
		}
		require.ErrorIs(t, Verify("", header, body, at, time.Minute), ErrSignatureMalformed)
	})

	t.Run("SpacesAroundElements", func(t *testing.T) {
		t.Parallel()
		h := strings.Replace(header, ",", " , ", 1)
		require.NoError(t, Verify("s3cr3t", h, body, at, time.Minute))
	})
}

func FuzzVerify(f *testing.F) {
	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"a"}`)
	f.Add(Sign("k", at, body), body)
	f.Add("t=1,v1=00", []byte(nil))
	f.Add("t=,v1=,", []byte("x"))
	f.Add(",,,=,t==1", []byte("x"))
	f.Add("t=99999999999999999999,v1="+strings.Repeat("a", 64), []byte("x"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := Verify("k", header, body, at, time.Hour)
		if err == nil {
			// Only a header that carries the body's signature verifies.
			ts, sigs, perr := parseSignature(header)
			require.NoError(t, perr)
			want := mac([]byte("k"), ts, body)
			found := false
			for _, s := range sigs {
				found = found || hmac.Equal(s, want)
			}
			require.True(t, found)
		}
		// Whatever the header, signing and verifying round-trips.
		require.NoError(t, Verify(header+"k", Sign(header+"k", at, body), body, at, time.Minute))
	})
}

func TestStandardKey(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef01234567") // 24 bytes
	got, err := StandardKey("whsec_" + base64.StdEncoding.EncodeToString(key))
	require.NoError(t, err)
	require.Equal(t, key, got)
	got, err = StandardKey("s3cr3t")
	require.NoError(t, err)
	require.Equal(t, []byte("s3cr3t"), got, "any other secret is its own key")
	for _, bad := range []string{
		"whsec_not base64!",
		"whsec_" + base64.RawStdEncoding.EncodeToString(key[:23]), // no padding
		"whsec_" + base64.StdEncoding.EncodeToString(key[:23]),    // too short
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)),
		"whsec_",
	} {
		_, err := StandardKey(bad)
		require.Error(t, err, bad)
	}
}

// TestSignRequest checks both signature headers against the Standard
// Webhooks specification written out here and the official Go library, for
// a whsec_ secret and a plain one signing together during a rotation.
func TestSignRequest(t *testing.T) {
	t.Parallel()
	at := time.Now().Truncate(time.Second)
	body := []byte(`{"id":"job-1","body":{"x":1}}`)
	key := []byte("0123456789abcdef0123456789abcdef")
	current := "whsec_" + base64.StdEncoding.EncodeToString(key)
	previous := "old-plain-secret"
	h := http.Header{}
	signRequest(h, []string{current, previous}, "job-1", at, body)

	ts := strconv.FormatInt(at.Unix(), 10)
	require.Equal(t, "job-1", h.Get("webhook-id"))
	require.Equal(t, ts, h.Get("webhook-timestamp"))
	spec := func(k []byte) string {
		m := hmac.New(sha256.New, k)
		m.Write([]byte("job-1." + ts + "." + string(body)))
		return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	require.Equal(t, spec(key)+" "+spec([]byte(previous)), h.Get("webhook-signature"))

	// The official library verifies with either secret, each as a
	// receiver holding only that one would configure it.
	for _, secret := range []string{current, "whsec_" + base64.StdEncoding.EncodeToString([]byte(previous))} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, h), secret)
		require.Error(t, wh.Verify(append(body, ' '), h), secret)
	}
	other, err := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString([]byte("another key of 24 bytes!")))
	require.NoError(t, err)
	require.ErrorIs(t, other.Verify(body, h), standardwebhooks.ErrNoMatchingSignature)

	// Delayq-Signature keeps its form, a v1 per secret, each keyed by the
	// secret as given.
	sig := h.Get(SignatureHeader)
	require.True(t, strings.HasPrefix(sig, "t="+ts+",v1="), sig)
	require.Equal(t, 2, strings.Count(sig, ",v1="))
	require.Equal(t, Sign(current, at, body), sig[:strings.LastIndex(sig, ",v1=")])
	for _, s := range []string{current, previous} {
		require.NoError(t, Verify(s, sig, body, at, time.Minute), s)
	}
	require.ErrorIs(t, Verify("other", sig, body, at, time.Minute), ErrSignatureMismatch)

	// One secret: one signature in each header; a whsec_ secret that
	// does not decode signs Delayq-Signature alone.
	one := http.Header{}
	signRequest(one, []string{"s3cr3t"}, "job-1", at, body)
	require.Equal(t, Sign("s3cr3t", at, body), one.Get(SignatureHeader))
	require.Equal(t, spec([]byte("s3cr3t")), one.Get("webhook-signature"))
	bad := http.Header{}
	signRequest(bad, []string{"whsec_???"}, "job-1", at, body)
	require.Equal(t, Sign("whsec_???", at, body), bad.Get(SignatureHeader))
	require.Empty(t, bad.Values("webhook-signature"))
	require.Empty(t, bad.Values("webhook-id"))
}
