// Package grpccount counts the RPCs a gRPC client makes, so that tests and
// benchmarks report round trips as measured, never as estimated.
//
// A Counter sees every unary call and every stream opened on a connection
// dialled with its DialOptions (a stream counts once when it opens: a
// Firestore Get is one BatchGetDocuments stream, a query one RunQuery
// stream). It counts attempts as the client makes them, so the client's own
// retries are counted too.
//
// EmulatorClient gives a Firestore client on the emulator whose RPCs are
// counted. Under FIRESTORE_EMULATOR_HOST the Firestore client dials the
// emulator itself and hands the connection over as option.WithGRPCConn, so
// interceptors passed with option.WithGRPCDialOption never see a call:
// EmulatorClient dials its own connection (with the "Bearer owner"
// credentials the emulator expects) and passes it last, which wins.
package grpccount

import (
	"context"
	"fmt"
	"path"
	"sync"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Counter records the methods called through the connections dialled with
// its DialOptions. It is safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	calls []string
}

// DialOptions returns the interceptors that count every unary call and every
// stream opened.
func (c *Counter) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.add(method)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

func (c *Counter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, path.Base(method))
}

// Take returns the methods called since the last Take (short names such as
// "Commit" or "BatchGetDocuments", in the order the calls started) and
// forgets them.
func (c *Counter) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

// ownerCreds sends what the Firestore client sends to the emulator under
// FIRESTORE_EMULATOR_HOST: admin rights, security rules bypassed.
type ownerCreds struct{}

func (ownerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (ownerCreds) RequireTransportSecurity() bool { return false }

// EmulatorClient returns a Firestore client for project on the emulator at
// host (host:port) whose RPCs c counts. Closing the client closes its
// connection.
func EmulatorClient(ctx context.Context, host, project string, c *Counter) (*firestore.Client, error) {
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(ownerCreds{}),
	}, c.DialOptions()...)
	conn, err := grpc.NewClient("passthrough:///"+host, opts...)
	if err != nil {
		return nil, fmt.Errorf("grpccount: dial the emulator at %s: %w", host, err)
	}
	client, err := firestore.NewClient(ctx, project, option.WithGRPCConn(conn))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("grpccount: firestore client for %s: %w", project, err)
	}
	return client, nil
}
