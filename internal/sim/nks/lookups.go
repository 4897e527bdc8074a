package nks

import (
	"net/netip"
	"strings"
)

// checkReferences refuses a cluster create whose network, subnet,
// internet-gateway network and subnets or base image are not in the
// simulator's world (sim/network: what GET /v2.0/networks and /v2/images
// answer), or do not belong together. Magnum validates the same
// references against Neutron and Glance before it creates anything; the
// simulator answers 400 with Magnum's wording (see docs/simulator.md).
func (s *Service) checkReferences(fixedNetwork, fixedSubnet string, l labels) error {
	n, ok := s.world.Network(fixedNetwork)
	if !ok {
		return errorf(400, "Fixed network %s could not be found.", fixedNetwork)
	}
	sn, ok := s.world.Subnet(fixedSubnet)
	if !ok {
		return errorf(400, "Fixed subnet %s could not be found.", fixedSubnet)
	}
	if sn.NetworkID != n.ID {
		return errorf(400, "Fixed subnet %s does not belong to the fixed network %s (it is a subnet of %s).", fixedSubnet, fixedNetwork, sn.NetworkID)
	}
	if ext := l["external_network_id"]; ext != "" {
		en, ok := s.world.Network(ext)
		switch {
		case !ok:
			return errorf(400, "External network %s could not be found.", ext)
		case !en.External:
			return errorf(400, "Network %s is not attached to the internet gateway (router:external is False): look it up with GET /v2.0/networks?router:external=True.", ext)
		}
		for _, id := range splitList(l["external_subnet_id_list"]) {
			esn, ok := s.world.Subnet(id)
			if !ok {
				return errorf(400, "External subnet %s could not be found.", id)
			}
			if esn.NetworkID != ext {
				return errorf(400, "External subnet %s is not a subnet of the external network %s.", id, ext)
			}
		}
	} else if l["external_subnet_id_list"] != "" {
		return errorf(400, "Label external_subnet_id_list needs external_network_id.")
	}
	return s.checkImage("node_image", l["node_image"])
}

// checkImage refuses an image UUID the image API does not know.
func (s *Service) checkImage(field, id string) error {
	if _, ok := s.world.Image(id); !ok {
		return errorf(400, "Image %s (%s) could not be found.", id, field)
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ":") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// worldCIDR is the range of a subnet of the world, if it has one.
func (s *Service) worldCIDR(id string) (netip.Prefix, bool) {
	sn, ok := s.world.Subnet(id)
	if !ok {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(sn.CIDR)
	return p.Masked(), err == nil
}
