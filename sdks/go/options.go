package orbit

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"os"
	"strings"
	"time"
)

// DefaultServer is the runtime URL used when neither Options.Server nor
// ORBIT_SERVER is set.
const DefaultServer = "http://127.0.0.1:7233"

// Options configures a Worker. Zero values select the defaults; connection
// settings left empty are read from the environment.
type Options struct {
	// WorkerID is the identity sent at registration; default go-<host>-<pid>.
	WorkerID string
	// Server is the runtime URL; default ORBIT_SERVER, then DefaultServer.
	Server string
	// Token is the bearer token; default ORBIT_WORKER_TOKEN, then ORBIT_TOKEN.
	Token string
	// CACertFile is a PEM CA certificate added to the system roots; default ORBIT_CA_CERT.
	CACertFile string
	// ClientCertFile and ClientKeyFile are the PEM client certificate and key
	// for mutual TLS; default ORBIT_CLIENT_CERT and ORBIT_CLIENT_KEY.
	ClientCertFile string
	ClientKeyFile  string
	// Concurrency is the number of poll goroutines, so the most attempts
	// this worker runs at once; default 4.
	Concurrency int
	// Runtime is the language announced at registration, matched against a
	// step's `using`; default "go".
	Runtime string
	// PollWait is how long each long poll waits for a task; default 20 s
	// (the runtime caps it at 60 s).
	PollWait time.Duration
	// Logger receives the SDK's messages; default standard error with the
	// prefix "[orbit] ".
	Logger *log.Logger
}

// settings are Options with every default applied.
type settings struct {
	workerID    string
	server      string
	token       string
	concurrency int
	runtime     string
	pollWait    time.Duration
	logger      *log.Logger
	tls         *tls.Config
}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

func resolve(opts Options) settings {
	s := settings{
		workerID:    opts.WorkerID,
		server:      strings.TrimRight(firstSet(opts.Server, os.Getenv("ORBIT_SERVER"), DefaultServer), "/"),
		token:       firstSet(opts.Token, os.Getenv("ORBIT_WORKER_TOKEN"), os.Getenv("ORBIT_TOKEN")),
		concurrency: opts.Concurrency,
		runtime:     firstSet(opts.Runtime, "go"),
		pollWait:    opts.PollWait,
		logger:      opts.Logger,
	}
	if s.workerID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		s.workerID = fmt.Sprintf("go-%s-%d", host, os.Getpid())
	}
	if s.concurrency <= 0 {
		s.concurrency = 4
	}
	if s.pollWait <= 0 {
		s.pollWait = 20 * time.Second
	}
	if s.logger == nil {
		s.logger = log.New(os.Stderr, "[orbit] ", 0)
	}
	s.tls = tlsConfig(
		firstSet(opts.CACertFile, os.Getenv("ORBIT_CA_CERT")),
		firstSet(opts.ClientCertFile, os.Getenv("ORBIT_CLIENT_CERT")),
		firstSet(opts.ClientKeyFile, os.Getenv("ORBIT_CLIENT_KEY")),
		s.logger,
	)
	return s
}

// tlsConfig builds the client's TLS settings. A file that cannot be used is
// logged and left out rather than returned as an error: NewWorker has no
// error result, and the handshake failures that follow show in the log.
func tlsConfig(caFile, certFile, keyFile string, logger *log.Logger) *tls.Config {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(caFile)
		switch {
		case err != nil:
			logger.Printf("cannot read the CA certificate %s: %v", caFile, err)
		case !pool.AppendCertsFromPEM(pem):
			logger.Printf("no PEM certificate found in %s", caFile)
		default:
			config.RootCAs = pool
		}
	}
	switch {
	case certFile != "" && keyFile == "":
		logger.Printf("client certificate %s given without its key (ClientKeyFile or ORBIT_CLIENT_KEY)", certFile)
	case certFile == "" && keyFile != "":
		logger.Printf("client key %s given without its certificate (ClientCertFile or ORBIT_CLIENT_CERT)", keyFile)
	case certFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			logger.Printf("cannot load the client certificate %s: %v", certFile, err)
		} else {
			config.Certificates = []tls.Certificate{pair}
		}
	}
	return config
}
