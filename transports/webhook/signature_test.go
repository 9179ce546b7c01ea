package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

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
			want := mac("k", ts, body)
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
