package easymaker

import em "github.com/runbook/runbook/internal/cloud/easymaker"

// catalog is the fixed list of instance types, images and provided
// algorithms (IDs stable across runs, so playbooks may name either).
func catalog() ([]em.Flavor, []em.Image, []em.Algorithm) {
	flavors := []em.Flavor{
		{FlavorID: "flv-00000000-0001", FlavorName: "c2.c4m8", VCPUs: 4, RAMMB: 8192},
		{FlavorID: "flv-00000000-0002", FlavorName: "c2.c8m16", VCPUs: 8, RAMMB: 16384},
		{FlavorID: "flv-00000000-0003", FlavorName: "m2.c4m16", VCPUs: 4, RAMMB: 16384},
		{FlavorID: "flv-00000000-0004", FlavorName: "g2.t4.c8m64", VCPUs: 8, RAMMB: 65536, GPUCount: 1},
		{FlavorID: "flv-00000000-0005", FlavorName: "g2.v100.c8m64", VCPUs: 8, RAMMB: 65536, GPUCount: 1},
	}
	images := []em.Image{
		{ImageID: "img-00000000-0001", ImageName: "Ubuntu 22.04 CPU TensorFlow Training", ImageTypeCode: "TRAINING", FrameworkCode: em.FrameworkTensorFlow, FrameworkVersion: "2.15.0", CoreTypeCode: "CPU"},
		{ImageID: "img-00000000-0002", ImageName: "Ubuntu 22.04 GPU TensorFlow Training", ImageTypeCode: "TRAINING", FrameworkCode: em.FrameworkTensorFlow, FrameworkVersion: "2.15.0", CoreTypeCode: "GPU"},
		{ImageID: "img-00000000-0003", ImageName: "Ubuntu 22.04 CPU PyTorch Training", ImageTypeCode: "TRAINING", FrameworkCode: em.FrameworkPyTorch, FrameworkVersion: "2.2.0", CoreTypeCode: "CPU"},
		{ImageID: "img-00000000-0004", ImageName: "Ubuntu 22.04 GPU PyTorch Training", ImageTypeCode: "TRAINING", FrameworkCode: em.FrameworkPyTorch, FrameworkVersion: "2.2.0", CoreTypeCode: "GPU"},
	}
	algorithms := []em.Algorithm{
		{AlgorithmID: "alg-00000000-0001", AlgorithmName: "Image Classification", AlgorithmDescription: "ResNet-50 image classifier", FrameworkCode: em.FrameworkPyTorch, MetricList: []string{"accuracy", "loss"}},
		{AlgorithmID: "alg-00000000-0002", AlgorithmName: "Object Detection", AlgorithmDescription: "YOLO object detector", FrameworkCode: em.FrameworkPyTorch, MetricList: []string{"mAP", "loss"}},
		{AlgorithmID: "alg-00000000-0003", AlgorithmName: "Semantic Segmentation", AlgorithmDescription: "DeepLab v3 segmentation", FrameworkCode: em.FrameworkTensorFlow, MetricList: []string{"mIoU", "loss"}},
	}
	return flavors, images, algorithms
}

func (s *Service) flavor(id string) bool {
	for _, f := range s.flavors {
		if f.FlavorID == id {
			return true
		}
	}
	return false
}

func (s *Service) image(id string) bool {
	for _, i := range s.images {
		if i.ImageID == id {
			return true
		}
	}
	return false
}

func (s *Service) algorithm(id string) *em.Algorithm {
	for i := range s.algorithms {
		if s.algorithms[i].AlgorithmID == id {
			return &s.algorithms[i]
		}
	}
	return nil
}
