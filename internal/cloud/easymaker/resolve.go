package easymaker

import (
	"context"
	"fmt"
	"strings"

	"github.com/runbook/runbook/internal/fault"
)

func checkID(what, v string) error {
	if strings.TrimSpace(v) == "" {
		return fault.Errorf(fault.Invalid, "easymaker: %s is empty", what)
	}
	return nil
}

func notFound(format string, args ...any) error {
	return fault.Errorf(fault.NotFound, "easymaker: "+format, args...)
}

func decodeErr(path string, err error) error {
	return &fault.Error{Code: fault.Internal, Message: "easymaker: GET " + path + ": decoding the answer", Err: err}
}

// ResolveFlavor returns the ID of the instance type named name (an ID is
// accepted as is). The list is read once per client.
func (c *Client) ResolveFlavor(ctx context.Context, name string) (string, error) {
	c.resolveMu.Lock()
	defer c.resolveMu.Unlock()
	if c.flavors == nil {
		items, err := c.ListFlavors(ctx)
		if err != nil {
			return "", err
		}
		c.flavors = items
	}
	return resolve("instance type", name, c.flavors, func(f *Flavor) (string, string) { return f.FlavorID, f.FlavorName })
}

// ResolveImage returns the ID of the image named name (an ID is accepted).
func (c *Client) ResolveImage(ctx context.Context, name string) (string, error) {
	c.resolveMu.Lock()
	defer c.resolveMu.Unlock()
	if c.images == nil {
		items, err := c.ListImages(ctx)
		if err != nil {
			return "", err
		}
		c.images = items
	}
	return resolve("image", name, c.images, func(i *Image) (string, string) { return i.ImageID, i.ImageName })
}

// ResolveAlgorithm returns the ID of the algorithm named name (an ID is
// accepted).
func (c *Client) ResolveAlgorithm(ctx context.Context, name string) (string, error) {
	c.resolveMu.Lock()
	defer c.resolveMu.Unlock()
	if c.algos == nil {
		items, err := c.ListAlgorithms(ctx)
		if err != nil {
			return "", err
		}
		c.algos = items
	}
	return resolve("algorithm", name, c.algos, func(a *Algorithm) (string, string) { return a.AlgorithmID, a.AlgorithmName })
}

// resolve finds name among items, by exact name first, then by ID, then
// by name ignoring case; the error lists the valid names.
func resolve[T any](what, name string, items []T, idName func(*T) (string, string)) (string, error) {
	name = strings.TrimSpace(name)
	var folded []string
	var choices []string
	for i := range items {
		id, n := idName(&items[i])
		if n == name || id == name {
			return id, nil
		}
		if strings.EqualFold(n, name) {
			folded = append(folded, id)
		}
		choices = append(choices, n)
	}
	if len(folded) == 1 {
		return folded[0], nil
	}
	return "", &fault.Error{Code: fault.NotFound,
		Message: fmt.Sprintf("%s %q does not exist; choices: %s", what, name, strings.Join(choices, ", ")),
		Data:    map[string]any{"choices": choices}}
}
