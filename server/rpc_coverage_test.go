package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestEveryRPCIsImplemented calls every method of every Lattice service, as
// the registered descriptors list them, with an empty request against a
// running server: none may fall through to the generated Unimplemented
// default (whatever else it answers, e.g. InvalidArgument, is fine here).
func TestEveryRPCIsImplemented(t *testing.T) {
	d := startDev(t, t.TempDir(), 2)
	n := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("lattice.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				full := "/" + string(sd.FullName()) + "/" + string(md.Name())
				n++
				t.Run(full, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					defer cancel()
					in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
					if err != nil {
						t.Fatal(err)
					}
					out, _ := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
					req, reply := in.New().Interface(), out.New().Interface()
					var callErr error
					if md.IsStreamingClient() || md.IsStreamingServer() {
						stream, err := d.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, full)
						if err != nil {
							t.Fatal(err)
						}
						if err := stream.SendMsg(req); err != nil {
							t.Fatal(err)
						}
						_ = stream.CloseSend()
						callErr = stream.RecvMsg(reply)
					} else {
						callErr = d.conn.Invoke(ctx, full, req, reply)
					}
					if status.Code(callErr) == codes.Unimplemented {
						t.Fatalf("%s is not implemented: %v", full, callErr)
					}
				})
			}
		}
		return true
	})
	if n < 25 {
		t.Fatalf("checked %d methods; the descriptors were not found", n)
	}
}
