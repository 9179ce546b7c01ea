package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/httptransport"
)

// configFlag is the serve flag that names the configuration file. The file
// itself cannot set it.
const configFlag = "config"

// topicsKey is the configuration file's list of topic configurations.
const topicsKey = "topics"

// configDoc is the top level of a configuration file: serve flags by name,
// and topics. The flag keys come from the flag set, so the inline map takes
// every other key and setFlagsFromFile rejects those that name no flag;
// KnownFields still holds the decoder to the strict YAML rules.
type configDoc struct {
	Topics yaml.Node            `yaml:"topics"`
	Flags  map[string]yaml.Node `yaml:",inline"`
}

// applyConfigFile reads the configuration file that --config (or
// DELAYQ_CONFIG) names, if any: it sets every serve flag of fs that the file
// names and neither the command line nor the flag's environment twin set, so
// that a flag beats its twin, which beats the file, which beats the default;
// and it decodes the file's topics into c.Topics, checked as PUT
// /v1/topics/{topic} checks them. Every error is a usage error naming the
// file and the key.
func (c *serveConfig) applyConfigFile(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	if c.ConfigFile == "" {
		return nil
	}
	path := c.ConfigFile
	data, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := errors.AsType[*os.PathError](err); ok {
			err = pe.Err
		}
		return usageErrorf("config file %s: %v", path, err)
	}
	var doc configDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return usageErrorf("config file %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return usageErrorf("config file %s: want one YAML document", path)
	}
	if err := setFlagsFromFile(path, fs, doc.Flags, lookupEnv); err != nil {
		return err
	}
	c.Topics, err = decodeFileTopics(path, &doc.Topics)
	return err
}

// setFlagsFromFile sets the flags that the file names, in the file's order,
// unless the command line or an environment twin set them.
func setFlagsFromFile(path string, fs *pflag.FlagSet, values map[string]yaml.Node, lookupEnv func(string) (string, bool)) error {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(values[a].Line, values[b].Line), strings.Compare(a, b))
	})
	for _, key := range keys {
		n := values[key]
		if key == configFlag {
			return usageErrorf("config file %s, line %d: %s cannot be set in a config file", path, n.Line, key)
		}
		f := fs.Lookup(key)
		if f == nil || key == "help" {
			return usageErrorf("config file %s, line %d: unknown key %q (the keys are serve's flag names and %s)", path, n.Line, key, topicsKey)
		}
		// A value of the wrong shape is an error even where a flag or
		// variable overrides it; a bad value only where it applies, as
		// with environment twins.
		if err := setFlagFromNode(f, &n, f.Changed || envSet(f, lookupEnv)); err != nil {
			return usageErrorf("config file %s, line %d: %s: %v", path, n.Line, key, err)
		}
	}
	return nil
}

// envSet reports whether f's environment twin is set and not empty, so that
// applyEnv used it.
func envSet(f *pflag.Flag, lookupEnv func(string) (string, bool)) bool {
	keys := f.Annotations[envAnnotation]
	if len(keys) == 0 {
		return false
	}
	v, ok := lookupEnv(keys[0])
	return ok && v != ""
}

// setFlagFromNode sets f from a YAML value with the flag's own Set, so the
// file's values are checked as the command line's are. A list sets a list
// flag; other flags take one value. With shapeOnly it checks the value's
// shape and sets nothing.
func setFlagFromNode(f *pflag.Flag, n *yaml.Node, shapeOnly bool) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return errors.New("has no value")
		}
		if shapeOnly {
			return nil
		}
		if err := f.Value.Set(n.Value); err != nil {
			return fmt.Errorf("invalid value %q: %w", n.Value, err)
		}
		return nil
	case yaml.SequenceNode:
		sv, ok := f.Value.(pflag.SliceValue)
		if !ok {
			return errors.New("want a single value, not a list")
		}
		vals := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind == yaml.AliasNode {
				item = item.Alias
			}
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return errors.New("want a list of single values")
			}
			vals = append(vals, item.Value)
		}
		if shapeOnly {
			return nil
		}
		if err := sv.Replace(vals); err != nil {
			return fmt.Errorf("invalid value %v: %w", vals, err)
		}
		return nil
	}
	return errors.New("want a single value, not a mapping")
}

// decodeFileTopics decodes the file's topics list. Each is a topic
// configuration as PUT /v1/topics/{topic} takes it, with its name in a
// name field; its values are validated as Engine.PutTopic validates them,
// but for the delivery's own checks, which run when serve applies it.
func decodeFileTopics(path string, list *yaml.Node) ([]*core.Topic, error) {
	if list.Kind == 0 || list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, usageErrorf("config file %s, line %d: %s must be a list of topic configurations", path, list.Line, topicsKey)
	}
	var topics []*core.Topic
	seen := map[string]int{}
	for i, n := range list.Content {
		where := fmt.Sprintf("config file %s, line %d: %s[%d]", path, n.Line, topicsKey, i)
		if n.Kind != yaml.MappingNode {
			return nil, usageErrorf("%s must be a mapping such as {name: orders.close, ttr: 30s}", where)
		}
		var m map[string]any
		if err := n.Decode(&m); err != nil {
			return nil, usageErrorf("%s: %s", where, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		name, ok := m["name"].(string)
		if !ok || name == "" {
			return nil, usageErrorf("%s has no name", where)
		}
		where = fmt.Sprintf("config file %s, line %d: topic %q", path, n.Line, name)
		if line, dup := seen[name]; dup {
			return nil, usageErrorf("%s is configured twice (first at line %d)", where, line)
		}
		seen[name] = n.Line
		data, err := json.Marshal(m)
		if err != nil {
			return nil, usageErrorf("%s: keys must be strings: %v", where, err)
		}
		t, err := httptransport.DecodeTopic(name, data)
		if err == nil {
			err = t.Validate()
		}
		if err != nil {
			return nil, usageErrorf("%s: %s", where, fieldMessage(err))
		}
		topics = append(topics, t)
	}
	return topics, nil
}

// fieldMessage is err's message, led by the field it names unless the
// message names it already.
func fieldMessage(err error) string {
	fe, ok := errors.AsType[*core.FieldError](err)
	if !ok || fe.Field == "" || strings.Contains(fe.Message, fe.Field) {
		return err.Error()
	}
	return fe.Field + ": " + fe.Message
}

// putFileTopics applies the configuration file's topics through
// Engine.PutTopic, at start. An invalid topic is a usage error naming the
// file, the topic and the field.
func putFileTopics(ctx context.Context, engine *core.Engine, cfg *serveConfig, log *slog.Logger) error {
	for _, t := range cfg.Topics {
		if err := engine.PutTopic(ctx, t); err != nil {
			msg := fmt.Errorf("config file %s: topic %q: %s", cfg.ConfigFile, t.Name, fieldMessage(err))
			if _, ok := errors.AsType[*core.FieldError](err); ok {
				return usageError(msg)
			}
			return msg
		}
		log.Info("topic configured from the config file", "topic", t.Name, "delivery", cmp.Or(t.Delivery.Type, core.DeliveryConsumer))
	}
	return nil
}
