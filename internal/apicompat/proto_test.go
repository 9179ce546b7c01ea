package apicompat_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	delayqv1 "github.com/delayq/delayq/gen/delayq/v1"
)

// updateProto rewrites the descriptor snapshot: done at a release, so that
// the next one is compared with it.
var updateProto = flag.Bool("update-proto", false, "rewrite testdata/delayq.v1.binpb from the generated descriptor (at a release)")

// snapshotPath is the FileDescriptorSet of proto/delayq/v1 at the last
// release.
var snapshotPath = filepath.Join("testdata", "delayq.v1.binpb")

// currentSet is the generated descriptor as a FileDescriptorSet.
func currentSet() *descriptorpb.FileDescriptorSet {
	// delayq.v1 first (fileOf), then the well-known types it imports.
	return &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{
		protodesc.ToFileDescriptorProto(delayqv1.File_delayq_v1_delayq_proto),
		protodesc.ToFileDescriptorProto(fieldmaskpb.File_google_protobuf_field_mask_proto),
	}}
}

// fileOf builds the first file of a set.
func fileOf(t *testing.T, set *descriptorpb.FileDescriptorSet) protoreflect.FileDescriptor {
	t.Helper()
	files, err := protodesc.NewFiles(set)
	require.NoError(t, err)
	fd, err := files.FindFileByPath(set.GetFile()[0].GetName())
	require.NoError(t, err)
	return fd
}

// TestProtoCompatible compares the generated descriptor of delayq.v1 with
// the snapshot of the last release: what a client built against that
// release relies on must still be there, with the same numbers, types and
// streaming; additions pass.
func TestProtoCompatible(t *testing.T) {
	t.Parallel()
	if *updateProto {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(currentSet())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(snapshotPath, b, 0o644))
	}
	b, err := os.ReadFile(snapshotPath)
	require.NoError(t, err, "no snapshot: run go test ./internal/apicompat -run TestProtoCompatible -update-proto at a release")
	var set descriptorpb.FileDescriptorSet
	require.NoError(t, proto.Unmarshal(b, &set))

	breaks := breakingChanges(fileOf(t, &set), delayqv1.File_delayq_v1_delayq_proto)
	if len(breaks) > 0 {
		t.Errorf("proto/delayq/v1/delayq.proto breaks clients of the last release (%s):\n  %s\n"+
			"Put back what was removed or changed; an intended break needs a new package version (delayq.v2).",
			snapshotPath, strings.Join(breaks, "\n  "))
	}
}

// TestProtoCompatibleCatches checks that the comparison sees each kind of
// break in a changed copy of the descriptor, and lets additions pass.
func TestProtoCompatibleCatches(t *testing.T) {
	t.Parallel()
	old := fileOf(t, currentSet())
	msg := func(fdp *descriptorpb.FileDescriptorProto, name string) *descriptorpb.DescriptorProto {
		for _, m := range fdp.GetMessageType() {
			if m.GetName() == name {
				return m
			}
		}
		t.Fatalf("no message %s", name)
		return nil
	}
	field := func(m *descriptorpb.DescriptorProto, name string) *descriptorpb.FieldDescriptorProto {
		for _, f := range m.GetField() {
			if f.GetName() == name {
				return f
			}
		}
		t.Fatalf("no field %s.%s", m.GetName(), name)
		return nil
	}
	method := func(fdp *descriptorpb.FileDescriptorProto, name string) *descriptorpb.MethodDescriptorProto {
		for _, m := range fdp.GetService()[0].GetMethod() {
			if m.GetName() == name {
				return m
			}
		}
		t.Fatalf("no method %s", name)
		return nil
	}
	for _, tc := range []struct {
		name   string
		change func(fdp *descriptorpb.FileDescriptorProto)
		want   []string
	}{
		{"renumbered field", func(fdp *descriptorpb.FileDescriptorProto) {
			field(msg(fdp, "Delivery"), "lease").Number = proto.Int32(60)
		}, []string{"delayq.v1.Delivery: field lease (6) removed", "delayq.v1.Delivery: field lease renumbered from 6 to 60"}},
		{"renamed field", func(fdp *descriptorpb.FileDescriptorProto) {
			f := field(msg(fdp, "Delivery"), "lease")
			f.Name, f.JsonName = proto.String("lease_token"), proto.String("leaseToken")
		}, []string{"delayq.v1.Delivery: field 6 renamed from lease to lease_token", "delayq.v1.Delivery: field 6 JSON name changed from lease to leaseToken"}},
		{"changed type", func(fdp *descriptorpb.FileDescriptorProto) {
			field(msg(fdp, "Delivery"), "attempt").Type = descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
		}, []string{"delayq.v1.Delivery: field attempt (4) changed type from int32 to int64"}},
		{"changed cardinality", func(fdp *descriptorpb.FileDescriptorProto) {
			field(msg(fdp, "Delivery"), "body").Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		}, []string{"delayq.v1.Delivery: field body (3) changed cardinality from optional to repeated"}},
		{"removed message", func(fdp *descriptorpb.FileDescriptorProto) {
			m := msg(fdp, "Counts")
			m.Name = proto.String("Tallies")
			field(msg(fdp, "Topic"), "counts").TypeName = proto.String(".delayq.v1.Tallies")
		}, []string{"delayq.v1.Topic: field counts (13) changed type from delayq.v1.Counts to delayq.v1.Tallies", "delayq.v1.Counts: message removed"}},
		{"removed method", func(fdp *descriptorpb.FileDescriptorProto) {
			svc := fdp.GetService()[0]
			svc.Method = svc.GetMethod()[1:]
		}, []string{"delayq.v1.DelayqService: method Push removed"}},
		{"changed streaming and types", func(fdp *descriptorpb.FileDescriptorProto) {
			m := method(fdp, "Subscribe")
			m.ServerStreaming = proto.Bool(false)
			m.InputType = proto.String(".delayq.v1.ClaimRequest")
		}, []string{"delayq.v1.DelayqService: method Subscribe changed request type from delayq.v1.SubscribeRequest to delayq.v1.ClaimRequest",
			"delayq.v1.DelayqService: method Subscribe changed streaming from server to none"}},
		{"additions pass", func(fdp *descriptorpb.FileDescriptorProto) {
			m := msg(fdp, "Delivery")
			m.Field = append(m.Field, &descriptorpb.FieldDescriptorProto{Name: proto.String("extra"), JsonName: proto.String("extra"), Number: proto.Int32(99),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()})
			fdp.MessageType = append(fdp.MessageType, &descriptorpb.DescriptorProto{Name: proto.String("Extra")})
			svc := fdp.GetService()[0]
			svc.Method = append(svc.Method, &descriptorpb.MethodDescriptorProto{Name: proto.String("Extra"),
				InputType: proto.String(".delayq.v1.Extra"), OutputType: proto.String(".delayq.v1.Extra")})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := currentSet()
			tc.change(set.GetFile()[0])
			require.Equal(t, tc.want, breakingChanges(old, fileOf(t, set)))
		})
	}
}

// breakingChanges lists what of old that new lacks or changed, in the
// order of old's declarations: messages, fields (by number), enums and
// their values (by number), services and methods, each unless new reserves
// its number or name.
func breakingChanges(old, new protoreflect.FileDescriptor) []string {
	var out []string
	report := func(where protoreflect.FullName, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s", where, fmt.Sprintf(format, args...)))
	}
	if old.Package() != new.Package() {
		report(old.FullName(), "package changed to %s", new.Package())
	}
	var messages func(olds protoreflect.MessageDescriptors)
	var enums func(olds protoreflect.EnumDescriptors)
	messages = func(olds protoreflect.MessageDescriptors) {
		for i := range olds.Len() {
			om := olds.Get(i)
			nm, _ := findDescriptor(new, om.FullName()).(protoreflect.MessageDescriptor)
			if nm == nil {
				report(om.FullName(), "message removed")
				continue
			}
			compareFields(om, nm, report)
			messages(om.Messages())
			enums(om.Enums())
		}
	}
	enums = func(olds protoreflect.EnumDescriptors) {
		for i := range olds.Len() {
			oe := olds.Get(i)
			ne, _ := findDescriptor(new, oe.FullName()).(protoreflect.EnumDescriptor)
			if ne == nil {
				report(oe.FullName(), "enum removed")
				continue
			}
			for j := range oe.Values().Len() {
				ov := oe.Values().Get(j)
				nv := ne.Values().ByNumber(ov.Number())
				switch {
				case nv == nil && !ne.ReservedRanges().Has(ov.Number()):
					report(oe.FullName(), "value %s (%d) removed", ov.Name(), ov.Number())
				case nv != nil && nv.Name() != ov.Name():
					report(oe.FullName(), "value %d renamed from %s to %s", ov.Number(), ov.Name(), nv.Name())
				}
			}
		}
	}
	messages(old.Messages())
	enums(old.Enums())
	for i := range old.Services().Len() {
		os := old.Services().Get(i)
		ns := new.Services().ByName(os.Name())
		if ns == nil {
			report(os.FullName(), "service removed")
			continue
		}
		for j := range os.Methods().Len() {
			om := os.Methods().Get(j)
			nm := ns.Methods().ByName(om.Name())
			if nm == nil {
				report(os.FullName(), "method %s removed", om.Name())
				continue
			}
			if om.Input().FullName() != nm.Input().FullName() {
				report(os.FullName(), "method %s changed request type from %s to %s", om.Name(), om.Input().FullName(), nm.Input().FullName())
			}
			if om.Output().FullName() != nm.Output().FullName() {
				report(os.FullName(), "method %s changed response type from %s to %s", om.Name(), om.Output().FullName(), nm.Output().FullName())
			}
			if streaming(om) != streaming(nm) {
				report(os.FullName(), "method %s changed streaming from %s to %s", om.Name(), streaming(om), streaming(nm))
			}
		}
	}
	return out
}

// compareFields reports the fields of om that nm lacks or changed: by
// number, since the number is what the wire carries, and by name, which
// protojson (Connect, gRPC-JSON) carries.
func compareFields(om, nm protoreflect.MessageDescriptor, report func(protoreflect.FullName, string, ...any)) {
	for i := range om.Fields().Len() {
		of := om.Fields().Get(i)
		nf := nm.Fields().ByNumber(of.Number())
		if nf == nil {
			if !nm.ReservedRanges().Has(of.Number()) {
				report(om.FullName(), "field %s (%d) removed", of.Name(), of.Number())
			}
			if moved := nm.Fields().ByName(of.Name()); moved != nil {
				report(om.FullName(), "field %s renumbered from %d to %d", of.Name(), of.Number(), moved.Number())
			}
			continue
		}
		if nf.Name() != of.Name() {
			report(om.FullName(), "field %d renamed from %s to %s", of.Number(), of.Name(), nf.Name())
		}
		if nf.JSONName() != of.JSONName() {
			report(om.FullName(), "field %d JSON name changed from %s to %s", of.Number(), of.JSONName(), nf.JSONName())
		}
		if ot, nt := fieldType(of), fieldType(nf); ot != nt {
			report(om.FullName(), "field %s (%d) changed type from %s to %s", of.Name(), of.Number(), ot, nt)
		}
		if oc, nc := cardinality(of), cardinality(nf); oc != nc {
			report(om.FullName(), "field %s (%d) changed cardinality from %s to %s", of.Name(), of.Number(), oc, nc)
		}
		if of.HasPresence() != nf.HasPresence() {
			report(om.FullName(), "field %s (%d) changed presence from %t to %t", of.Name(), of.Number(), of.HasPresence(), nf.HasPresence())
		}
		if oo, no := oneofName(of), oneofName(nf); oo != no {
			report(om.FullName(), "field %s (%d) moved from oneof %q to %q", of.Name(), of.Number(), oo, no)
		}
	}
}

// findDescriptor finds a message or enum of file by its full name, nested
// ones too.
func findDescriptor(file protoreflect.FileDescriptor, name protoreflect.FullName) protoreflect.Descriptor {
	var inMessages func(ms protoreflect.MessageDescriptors) protoreflect.Descriptor
	inEnums := func(es protoreflect.EnumDescriptors) protoreflect.Descriptor {
		for i := range es.Len() {
			if es.Get(i).FullName() == name {
				return es.Get(i)
			}
		}
		return nil
	}
	inMessages = func(ms protoreflect.MessageDescriptors) protoreflect.Descriptor {
		for i := range ms.Len() {
			m := ms.Get(i)
			if m.FullName() == name {
				return m
			}
			if !strings.HasPrefix(string(name), string(m.FullName())+".") {
				continue
			}
			if d := inMessages(m.Messages()); d != nil {
				return d
			}
			if d := inEnums(m.Enums()); d != nil {
				return d
			}
		}
		return nil
	}
	if d := inMessages(file.Messages()); d != nil {
		return d
	}
	return inEnums(file.Enums())
}

// fieldType names a field's type: its kind, or the message or enum it
// holds (a map's key and value types included).
func fieldType(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return fmt.Sprintf("map<%s, %s>", fieldType(f.MapKey()), fieldType(f.MapValue()))
	}
	switch {
	case f.Message() != nil:
		return string(f.Message().FullName())
	case f.Enum() != nil:
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}

func cardinality(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return "map"
	}
	return f.Cardinality().String()
}

func oneofName(f protoreflect.FieldDescriptor) string {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return string(o.Name())
	}
	return ""
}

// streaming names a method's streaming.
func streaming(m protoreflect.MethodDescriptor) string {
	switch {
	case m.IsStreamingClient() && m.IsStreamingServer():
		return "bidi"
	case m.IsStreamingClient():
		return "client"
	case m.IsStreamingServer():
		return "server"
	}
	return "none"
}
