package network

import (
	"crypto/sha1"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/runbook/runbook/internal/sim"
	"github.com/runbook/runbook/internal/sim/identity"
)

// Network is a VPC network.
type Network struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	External bool     `json:"router:external"` // attached to the internet gateway
	Shared   bool     `json:"shared"`
	Subnets  []string `json:"subnets"`
}

// Subnet is a VPC subnet of a network.
type Subnet struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	NetworkID string `json:"network_id"`
	CIDR      string `json:"cidr"`
	GatewayIP string `json:"gateway_ip"`
}

// Image is a base image.
type Image struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Region is the region the default world describes.
const Region = "kr1"

// Default UUIDs of the default world.
const (
	DefaultNetworkID       = "a1b2c3d4-0000-4000-8000-000000000001"
	DefaultSubnetID        = "a1b2c3d4-0000-4000-8000-000000000002"
	PublicNetworkID        = "a1b2c3d4-0000-4000-8000-0000000000a1"
	PublicSubnet1ID        = "a1b2c3d4-0000-4000-8000-0000000000a2"
	PublicSubnet2ID        = "a1b2c3d4-0000-4000-8000-0000000000a3"
	DefaultUbuntu2204Image = "6f6b9a7e-2a3c-4d8b-9c41-0e5b1f0f6a11"
)

// BaseImages are the images the spec lists in both regions.
var BaseImages = []string{
	"CentOS 7.9", "Debian 11.8 Bullseye", "Rocky Linux 8.9",
	"Ubuntu Server 20.04.6 LTS", "Ubuntu Server 22.04.3 LTS",
}

// ImageID is the UUID of a base image in a region: the one the project's
// examples use for Ubuntu Server 22.04.3 LTS in kr1, else derived from the
// region and the name.
func ImageID(region, name string) string {
	if region == Region && name == "Ubuntu Server 22.04.3 LTS" {
		return DefaultUbuntu2204Image
	}
	b := sha1.Sum([]byte(region + "/" + name))
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// World holds the networks, subnets and images of one simulator server.
// It is safe for concurrent use.
type World struct {
	Tenant string

	mu       sync.Mutex
	networks []Network
	subnets  []Subnet
	images   []Image
}

var (
	worldsMu sync.Mutex
	worlds   = map[weak.Pointer[sim.Env]]*World{}
)

// For returns the world of env's server, creating the default one on first
// use. The network and image services and the cluster simulator share it.
func For(env *sim.Env) *World {
	key := weak.Make(env)
	worldsMu.Lock()
	defer worldsMu.Unlock()
	if w, ok := worlds[key]; ok {
		return w
	}
	w := newDefault(identity.For(env).Credentials().TenantID)
	worlds[key] = w
	runtime.AddCleanup(env, func(k weak.Pointer[sim.Env]) {
		worldsMu.Lock()
		defer worldsMu.Unlock()
		delete(worlds, k)
	}, key)
	return w
}

func newDefault(tenant string) *World {
	w := &World{Tenant: tenant}
	w.AddNetwork(Network{ID: DefaultNetworkID, Name: "Default Network"})
	w.AddNetwork(Network{ID: PublicNetworkID, Name: "Public Network", External: true, Shared: true})
	for _, s := range []Subnet{
		{ID: DefaultSubnetID, Name: "Default Network Subnet", NetworkID: DefaultNetworkID, CIDR: "192.168.0.0/24", GatewayIP: "192.168.0.1"},
		{ID: PublicSubnet1ID, Name: "Public Subnet 1", NetworkID: PublicNetworkID, CIDR: "133.186.0.0/24", GatewayIP: "133.186.0.1"},
		{ID: PublicSubnet2ID, Name: "Public Subnet 2", NetworkID: PublicNetworkID, CIDR: "133.186.1.0/24", GatewayIP: "133.186.1.1"},
	} {
		_ = w.AddSubnet(s)
	}
	for _, name := range BaseImages {
		w.images = append(w.images, Image{ID: ImageID(Region, name), Name: name})
	}
	return w
}

// AddNetwork adds a network (its Subnets are filled by AddSubnet) or
// replaces the one with its ID.
func (w *World) AddNetwork(n Network) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n.Subnets = nil
	if i := slices.IndexFunc(w.networks, func(x Network) bool { return x.ID == n.ID }); i >= 0 {
		n.Subnets = w.networks[i].Subnets
		w.networks[i] = n
		return
	}
	w.networks = append(w.networks, n)
}

// AddSubnet adds a subnet to its network.
func (w *World) AddSubnet(s Subnet) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.IndexFunc(w.networks, func(x Network) bool { return x.ID == s.NetworkID })
	if i < 0 {
		return fmt.Errorf("no network %s for subnet %s", s.NetworkID, s.ID)
	}
	if slices.ContainsFunc(w.subnets, func(x Subnet) bool { return x.ID == s.ID }) {
		return fmt.Errorf("subnet %s exists", s.ID)
	}
	w.subnets = append(w.subnets, s)
	w.networks[i].Subnets = append(slices.Clone(w.networks[i].Subnets), s.ID)
	return nil
}

// Networks returns a copy of every network.
func (w *World) Networks() []Network {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.networks)
}

// Subnets returns a copy of every subnet.
func (w *World) Subnets() []Subnet {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.subnets)
}

// Images returns a copy of every image.
func (w *World) Images() []Image {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.images)
}

// Network finds a network by UUID.
func (w *World) Network(id string) (Network, bool) {
	for _, n := range w.Networks() {
		if n.ID == id {
			return n, true
		}
	}
	return Network{}, false
}

// Subnet finds a subnet by UUID.
func (w *World) Subnet(id string) (Subnet, bool) {
	for _, s := range w.Subnets() {
		if s.ID == id {
			return s, true
		}
	}
	return Subnet{}, false
}

// Image finds an image by UUID.
func (w *World) Image(id string) (Image, bool) {
	for _, i := range w.Images() {
		if i.ID == id {
			return i, true
		}
	}
	return Image{}, false
}
