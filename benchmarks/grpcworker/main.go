// Command grpcworker is bench_http's raw worker over the gRPC binding,
// written against grpc-go so that the benchmark's own client costs little
// CPU and the figure measures the runtime's gRPC path, as the Go SDK worker
// does for HTTP/JSON.
//
// It speaks orbit.worker.v1.WorkerService with messages encoded by hand
// (protowire) and a pass-through codec, so it needs no generated code. Its
// goroutines share one connection, as grpc-go clients do.
//
// Environment: ORBIT_GRPC_TARGET (host:port), ORBIT_WORKER_TOKEN,
// ORBIT_BENCH_WORKER_ID, ORBIT_BENCH_CONCURRENCY, and ORBIT_CA_CERT for TLS.
// SIGTERM stops it after it unregisters.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	service = "/orbit.worker.v1.WorkerService/"
	task    = "bench.step"
)

// raw passes already-encoded messages through grpc-go untouched.
type raw struct{}

func (raw) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }

func (raw) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append((*(v.(*[]byte)))[:0], data...)
	return nil
}

func (raw) Name() string { return "proto" }

func str(b []byte, n protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func bytes(b []byte, n protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func varint(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// fields calls fn for each length-delimited field of a message.
func fields(b []byte, fn func(n protowire.Number, v []byte)) error {
	for len(b) > 0 {
		n, t, size := protowire.ConsumeTag(b)
		if size < 0 {
			return protowire.ParseError(size)
		}
		b = b[size:]
		if t == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			fn(n, v)
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(n, t, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}

type worker struct {
	conn *grpc.ClientConn
}

func (w *worker) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	var reply []byte
	err := w.conn.Invoke(ctx, service+method, &req, &reply, grpc.ForceCodec(raw{}))
	return reply, err
}

// serve polls and completes until ctx ends: each task's output is its
// input's i plus one.
func (w *worker) serve(ctx context.Context, session string) {
	poll := varint(str(nil, 1, session), 2, 1000)
	for ctx.Err() == nil {
		reply, err := w.call(ctx, "PollTask", poll)
		if err != nil {
			if ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		var token string
		var input []byte
		if err := fields(reply, func(n protowire.Number, v []byte) {
			switch n {
			case 1:
				token = string(v)
			case 8:
				input = v
			}
		}); err != nil || token == "" {
			continue
		}
		value := &structpb.Value{}
		if err := proto.Unmarshal(input, value); err != nil {
			fmt.Fprintln(os.Stderr, "grpcworker: bad input:", err)
			continue
		}
		i := value.GetStructValue().GetFields()["i"].GetNumberValue()
		output, _ := proto.Marshal(structpb.NewStructValue(&structpb.Struct{
			Fields: map[string]*structpb.Value{"i": structpb.NewNumberValue(i + 1)},
		}))
		if _, err := w.call(ctx, "CompleteTask", bytes(str(nil, 1, token), 2, output)); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "grpcworker: complete:", err)
		}
	}
}

func run() error {
	target := os.Getenv("ORBIT_GRPC_TARGET")
	if target == "" {
		return errors.New("ORBIT_GRPC_TARGET is not set")
	}
	threads, err := strconv.Atoi(os.Getenv("ORBIT_BENCH_CONCURRENCY"))
	if err != nil || threads < 1 {
		threads = 8
	}
	creds := insecure.NewCredentials()
	if ca := os.Getenv("ORBIT_CA_CERT"); ca != "" {
		if creds, err = credentials.NewClientTLSFromFile(ca, ""); err != nil {
			return err
		}
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	w := &worker{conn: conn}
	base := metadata.AppendToOutgoingContext(
		context.Background(), "authorization", "Bearer "+os.Getenv("ORBIT_WORKER_TOKEN"))

	contract := str(str(nil, 1, task), 2, "1.0.0")
	id := os.Getenv("ORBIT_BENCH_WORKER_ID")
	register := str(bytes(str(str(nil, 1, id), 2, "go"), 3, contract), 4, "bench_http")
	reply, err := w.call(base, "RegisterWorker", register)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	var session string
	if err := fields(reply, func(n protowire.Number, v []byte) {
		if n == 2 {
			session = string(v)
		}
	}); err != nil || session == "" {
		return fmt.Errorf("register: no session in the reply (%v)", err)
	}

	ctx, stop := signal.NotifyContext(base, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var wg sync.WaitGroup
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.serve(ctx, session)
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(base, 5*time.Second)
	defer cancel()
	_, err = w.call(ctx, "UnregisterWorker", str(nil, 1, session))
	return err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "grpcworker:", err)
		os.Exit(1)
	}
}
