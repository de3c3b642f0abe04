package orbit

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type issued struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// issue makes a certificate signed by parent (self-signed when nil).
func issue(t *testing.T, name string, parent *issued, serverIP net.IP, client bool) *issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	if parent == nil {
		template.IsCA = true
		template.BasicConstraintsValid = true
	}
	if serverIP != nil {
		template.IPAddresses = []net.IP{serverIP}
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	if client {
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	signer, signerKey := template, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return &issued{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

func write(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A runtime that requires a client certificate from its CA: the worker
// trusts the runtime through CACertFile and presents its own certificate.
func TestMutualTLS(t *testing.T) {
	ca := issue(t, "orbit test CA", nil, nil, false)
	server := issue(t, "runtime", ca, net.ParseIP("127.0.0.1"), false)
	client := issue(t, "payments-1", ca, nil, true)
	dir := t.TempDir()
	caFile := write(t, dir, "ca.pem", ca.certPEM)
	certFile := write(t, dir, "client.pem", client.certPEM)
	keyFile := write(t, dir, "client.key", client.keyPEM)

	pair, err := tls.X509KeyPair(server.certPEM, server.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(ca.cert)
	f := unstartedFakeRuntime(t)
	f.server.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
	f.server.StartTLS()

	w, logs := newTestWorker(f, 1)
	w.settings.tls = tlsConfig(caFile, certFile, keyFile, w.settings.logger)
	w.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return map[string]any{"ok": true}, nil })
	start(t, w, logs)
	f.queue(task("tok-tls", "x", `{}`))
	if r := f.result(); r.Path != pathComplete {
		t.Fatalf("result = %+v", r)
	}

	// Without the client certificate the handshake fails, registration is
	// retried, and Run gives up when its context ends.
	bare, bareLogs := newTestWorker(f, 1)
	bare.settings.tls = tlsConfig(caFile, "", "", bare.settings.logger)
	bare.Task("x", "1.0.0", func(context.Context, *Task) (any, error) { return nil, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var apiErr *APIError
	if err := bare.Run(ctx); !errors.As(err, &apiErr) || apiErr.Code != "CONNECTION" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(bareLogs.String(), "registration failed") {
		t.Fatal(bareLogs.String())
	}
}

func TestUnusableCertificateFilesAreLogged(t *testing.T) {
	logs := &safeBuffer{}
	w := NewWorker(Options{
		CACertFile:     filepath.Join(t.TempDir(), "missing.pem"),
		ClientCertFile: "client.pem",
		Logger:         newLogger(logs),
	})
	if w.settings.tls == nil || w.settings.tls.RootCAs != nil || len(w.settings.tls.Certificates) != 0 {
		t.Fatalf("tls = %+v", w.settings.tls)
	}
	for _, want := range []string{"cannot read the CA certificate", "given without its key"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q: %s", want, logs)
		}
	}
}
