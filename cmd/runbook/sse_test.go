package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadSSEFollowsTheFormat(t *testing.T) {
	stream := "retry: 2000\n\n" +
		": heartbeat\n\n" +
		"id: 1\nevent: step.started\ndata: {\"a\":1}\n\n" +
		"id: 2\ndata: first\n: a comment inside an event\ndata: second\n\n" +
		"event: end\ndata: {}\n\n" +
		"id: 9\ndata: never read\n\n"
	var got []sseEvent
	stopped, err := readSSE(strings.NewReader(stream), func(ev sseEvent) (bool, error) {
		got = append(got, ev)
		return ev.typ != "end", nil
	})
	require.NoError(t, err)
	assert.True(t, stopped)
	assert.Equal(t, []sseEvent{
		{typ: "step.started", id: "1", data: `{"a":1}`},
		{id: "2", data: "first\nsecond"},
		{typ: "end", id: "2", data: "{}"},
	}, got)

	stopped, err = readSSE(strings.NewReader("data: x\n\n"), func(sseEvent) (bool, error) { return true, nil })
	assert.False(t, stopped, "a stream that ends is not stopped")
	assert.NoError(t, err)

	boom := errors.New("boom")
	stopped, err = readSSE(strings.NewReader("data: x\n\n"), func(sseEvent) (bool, error) { return false, boom })
	assert.True(t, stopped)
	assert.ErrorIs(t, err, boom)
}
