#!/usr/bin/env python3
"""Writes the graph nets in configs/ (configs have no loops; this is their loop).

    python3 tools/gen_configs.py            # (re)write them
    python3 tools/gen_configs.py --check    # exit 1 if a file differs from what this writes

ResNets for 32x32 images (He et al. 2016, section 4.2: 6n + 2 layers, basic blocks of
16/32/64 filters), ResNet-50 (224x224, bottleneck blocks, projection shortcuts where the
shape changes), GoogLeNet (Szegedy et al. 2015, table 1, with the pooling of Caffe's
bvlc_googlenet, without the auxiliary classifiers), a DenseNet for 32x32 (Huang et al.
2017, DenseNet-40, k = 12), a small ResNet for Fashion-MNIST, and the vDNN paper's very
deep VGG-116/216/316/416 (Rhu et al. 2016: VGG-16 with more 3x3 convolutions per stage;
plain chains, but too long to write by hand).

Where a block changes the shape, the CIFAR ResNets use projection shortcuts (He et al.'s
option B: a strided 1x1 convolution and batch norm) instead of option A's zero padding,
which needs a layer vdnn does not have; that adds under 1% of parameters."""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


class Cfg:
    def __init__(self):
        self.lines = []

    def comment(self, text):
        for line in text.strip().splitlines():
            self.lines.append(("# " + line).rstrip())

    def section(self, kind, **keys):
        self.lines.append("[%s]" % kind)
        for key, value in keys.items():
            if value is None:
                continue
            self.lines.append("%s = %s" % (key, value))

    def blank(self):
        self.lines.append("")

    def text(self):
        return "\n".join(self.lines) + "\n"


def header(c, batch, channels, size, train, data):
    c.section("net", batch=batch, channels=channels, height=size, width=size)
    c.blank()
    c.section("train", **train)
    c.blank()
    c.section("data", **data)
    c.blank()


CIFAR_DATA = dict(set="cifar10", path="data/cifar-10-batches-bin", crop_pad=4, flip=1,
                  mean="0.4914, 0.4822, 0.4465", std="0.2470, 0.2435, 0.2616")
IMAGENET_DATA = dict(set="png", path="data/imagenet", mean="0.485, 0.456, 0.406", std="0.229, 0.224, 0.225")


def conv(c, filters, size, stride=1, pad=None, name=None, input=None, bias=0, init=None):
    if pad is None:
        pad = size // 2
    c.section("convolutional", name=name, input=input, filters=filters, size=size,
              stride=stride if stride != 1 else None, pad=pad if pad else None, bias=bias, init=init)


def basic_block(c, prev, name, filters, stride):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU; returns the block's name."""
    conv(c, filters, 3, stride)
    c.section("batchnorm")
    c.section("relu")
    conv(c, filters, 3)
    c.section("batchnorm", name=name + "_res")
    if stride != 1:
        conv(c, filters, 1, stride, name=name + "_proj_conv", input=prev)
        c.section("batchnorm", name=name + "_proj")
        c.section("add", input="%s_res, %s_proj" % (name, name))
    else:
        c.section("add", input="%s_res, %s" % (name, prev))
    c.section("relu", name=name)
    return name


def resnet_small(n, title, batch, channels, size, widths, data, train, classes=10):
    c = Cfg()
    c.comment(title)
    c.comment("Written by tools/gen_configs.py; edit that, not this.")
    c.blank()
    header(c, batch, channels, size, train, data)
    conv(c, widths[0], 3)
    c.section("batchnorm")
    c.section("relu", name="stem")
    prev, side = "stem", size
    for s, width in enumerate(widths):
        for b in range(n):
            stride = 2 if s > 0 and b == 0 else 1
            if stride == 2:
                side //= 2
            c.blank()
            prev = basic_block(c, prev, "s%db%d" % (s + 1, b + 1), width, stride)
    c.blank()
    c.section("avgpool", size=side)
    c.section("connected", output=classes)
    c.section("softmax")
    return c.text()


CIFAR_RESNET_TRAIN = dict(epochs=160, learning_rate=0.1, momentum=0.9, weight_decay=0.0001, lr_schedule="cosine",
                          seed=1)


def resnet_cifar(depth):
    n = (depth - 2) // 6
    title = ("ResNet-%d for CIFAR-10 (3x32x32, 10 classes): He et al. 2016, section 4.2, n = %d basic blocks\n"
             "per stage of 16, 32 and 64 filters, projection shortcuts where the shape changes.\n"
             "Download CIFAR-10 (binary version) into data/, or point --data at it.") % (depth, n)
    return resnet_small(n, title, 128, 3, 32, [16, 32, 64], CIFAR_DATA, CIFAR_RESNET_TRAIN)


def resnet_fmnist():
    title = ("A small ResNet for Fashion-MNIST (1x28x28, 10 classes): two basic blocks per stage of 16, 32\n"
             "and 64 filters (ResNet-14), random crops and flips. Beats the default net (configs/fmnist.cfg);\n"
             "bench/graphs.md has the measured run.")
    train = dict(epochs=12, learning_rate=0.1, momentum=0.9, weight_decay=0.0005, lr_schedule="cosine",
                 min_lr=0.0005, seed=1)
    data = dict(set="fashion-mnist", path="/usr/share/datasets/fashion-mnist", crop_pad=2, flip=1, mean=0.286,
                std=0.353)
    return resnet_small(2, title, 128, 1, 28, [16, 32, 64], data, train)


def resnet50():
    c = Cfg()
    c.comment("ResNet-50 (3x224x224, 1000 classes): He et al. 2016, table 1, bottleneck blocks, projection\n"
              "shortcuts where the shape changes, the stride in the first 1x1 convolution.\n"
              "[data] expects a PNG folder (train/<class>/*.png, test/<class>/*.png) of 224x224 images.\n"
              "Written by tools/gen_configs.py; edit that, not this.")
    c.blank()
    header(c, 64, 3, 224, dict(epochs=90, learning_rate=0.1, momentum=0.9, weight_decay=0.0001, lr_schedule="step",
                               step_epochs=30, gamma=0.1, seed=1), IMAGENET_DATA)
    conv(c, 64, 7, 2, 3)
    c.section("batchnorm")
    c.section("relu")
    c.section("maxpool", size=3, stride=2, pad=1, name="stem")
    prev = "stem"
    for s, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for b in range(blocks):
            name = "s%db%d" % (s + 1, b + 1)
            stride = 2 if s > 0 and b == 0 else 1
            c.blank()
            conv(c, width, 1, stride)
            c.section("batchnorm")
            c.section("relu")
            conv(c, width, 3)
            c.section("batchnorm")
            c.section("relu")
            conv(c, 4 * width, 1)
            c.section("batchnorm", name=name + "_res")
            if b == 0:
                conv(c, 4 * width, 1, stride, name=name + "_proj_conv", input=prev)
                c.section("batchnorm", name=name + "_proj")
                c.section("add", input="%s_res, %s_proj" % (name, name))
            else:
                c.section("add", input="%s_res, %s" % (name, prev))
            c.section("relu", name=name)
            prev = name
    c.blank()
    c.section("avgpool", size=7)
    c.section("connected", output=1000)
    c.section("softmax")
    return c.text()


def inception(c, prev, name, c1, r3, c3, r5, c5, pool):
    c.blank()
    c.comment("inception (%s): 1x1 %d, 3x3 %d->%d, 5x5 %d->%d, pool->%d" % (name, c1, r3, c3, r5, c5, pool))
    conv(c, c1, 1, input=prev, bias=None, init="xavier")
    c.section("relu", name=name + "_1x1")
    conv(c, r3, 1, input=prev, bias=None, init="xavier")
    c.section("relu")
    conv(c, c3, 3, bias=None, init="xavier")
    c.section("relu", name=name + "_3x3")
    conv(c, r5, 1, input=prev, bias=None, init="xavier")
    c.section("relu")
    conv(c, c5, 5, bias=None, init="xavier")
    c.section("relu", name=name + "_5x5")
    c.section("maxpool", input=prev, size=3, stride=1, pad=1)
    conv(c, pool, 1, bias=None, init="xavier")
    c.section("relu", name=name + "_pool")
    c.section("concat", name=name, input="%s_1x1, %s_3x3, %s_5x5, %s_pool" % (name, name, name, name))
    return name


def googlenet():
    c = Cfg()
    c.comment("GoogLeNet (Inception v1; 3x224x224, 1000 classes): Szegedy et al. 2015, table 1, as Caffe's\n"
              "bvlc_googlenet: max pooling 3/2 rounds up (ceil_mode), maps 112, 56, 28, 14, 7. Without the\n"
              "auxiliary classifiers: a net here has one loss, the last layer. Convolutions start as Caffe's\n"
              "(xavier: with he, 22 layers of max pooling and concatenation start the loss near 13, not ln 1000).\n"
              "[data] expects a PNG folder (train/<class>/*.png, test/<class>/*.png) of 224x224 images.\n"
              "Written by tools/gen_configs.py; edit that, not this.")
    c.blank()
    header(c, 64, 3, 224, dict(epochs=60, learning_rate=0.01, momentum=0.9, weight_decay=0.0002, lr_schedule="cosine",
                               seed=1), IMAGENET_DATA)
    conv(c, 64, 7, 2, 3, bias=None, init="xavier")
    c.section("relu")
    c.section("maxpool", size=3, stride=2, ceil_mode=1)
    c.section("lrn", size=5, alpha=0.0001, beta=0.75)
    conv(c, 64, 1, bias=None, init="xavier")
    c.section("relu")
    conv(c, 192, 3, bias=None, init="xavier")
    c.section("relu")
    c.section("lrn", size=5, alpha=0.0001, beta=0.75)
    c.section("maxpool", size=3, stride=2, ceil_mode=1, name="pool2")
    prev = inception(c, "pool2", "i3a", 64, 96, 128, 16, 32, 32)
    prev = inception(c, prev, "i3b", 128, 128, 192, 32, 96, 64)
    c.section("maxpool", size=3, stride=2, ceil_mode=1, name="pool3")
    prev = inception(c, "pool3", "i4a", 192, 96, 208, 16, 48, 64)
    prev = inception(c, prev, "i4b", 160, 112, 224, 24, 64, 64)
    prev = inception(c, prev, "i4c", 128, 128, 256, 24, 64, 64)
    prev = inception(c, prev, "i4d", 112, 144, 288, 32, 64, 64)
    prev = inception(c, prev, "i4e", 256, 160, 320, 32, 128, 128)
    c.section("maxpool", size=3, stride=2, ceil_mode=1, name="pool4")
    prev = inception(c, "pool4", "i5a", 256, 160, 320, 32, 128, 128)
    prev = inception(c, prev, "i5b", 384, 192, 384, 48, 128, 128)
    c.blank()
    c.section("avgpool", size=7)
    c.section("dropout", probability=0.4)
    c.section("connected", output=1000)
    c.section("softmax")
    return c.text()


def densenet():
    c = Cfg()
    c.comment("DenseNet-40 (k = 12) for CIFAR-10 (3x32x32, 10 classes): Huang et al. 2017, three dense blocks of\n"
              "12 layers (batch norm, ReLU, 3x3 convolution of 12 filters, joined to all before it by\n"
              "[concat]) with transitions (batch norm, ReLU, 1x1 convolution, 2x2 average pooling).\n"
              "Download CIFAR-10 (binary version) into data/, or point --data at it.\n"
              "Written by tools/gen_configs.py; edit that, not this.")
    c.blank()
    header(c, 64, 3, 32, dict(epochs=300, learning_rate=0.1, momentum=0.9, weight_decay=0.0001,
                              lr_schedule="cosine", seed=1), CIFAR_DATA)
    conv(c, 16, 3, name="d0")
    feats, channels = "d0", 16
    for block in range(3):
        for layer in range(12):
            c.blank()
            name = "b%dl%d" % (block + 1, layer + 1)
            c.section("batchnorm", input=feats)
            c.section("relu")
            conv(c, 12, 3)
            c.section("concat", name=name, input="%s, -1" % feats)
            feats, channels = name, channels + 12
        c.blank()
        c.section("batchnorm")
        c.section("relu")
        if block < 2:
            conv(c, channels, 1)
            c.section("avgpool", size=2, name="t%d" % (block + 1))
            feats = "t%d" % (block + 1)
    c.section("avgpool", size=8)
    c.section("connected", output=10)
    c.section("softmax")
    return c.text()


VGG_STAGES = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]   # VGG-16 (configuration D)


def vgg_deep(depth):
    """VGG-16 with (depth - 16) / 5 more 3x3 convolutions in each of its five stages."""
    extra = (depth - 16) // len(VGG_STAGES)
    assert extra * len(VGG_STAGES) == depth - 16
    convs = [n + extra for _, n in VGG_STAGES]
    c = Cfg()
    c.comment("VGG-%d (3x224x224, 1000 classes): the vDNN paper's very deep VGG (Rhu et al. 2016), VGG-16\n"
              "(Simonyan and Zisserman 2015, configuration D) with %d more 3x3 convolutions (pad 1,\n"
              "ReLU), %d added to each of the five stages, each as wide as its stage (64, 128, 256, 512,\n"
              "512 filters): %s convolutions, then VGG-16's three fully connected layers.\n"
              "The paper gives the depth only; this even split across the stages is this file's\n"
              "choice, not a published layout. %s parameters: VGG-16's 138,357,544 and\n"
              "(9 w^2 + w) per added layer of width w.\n"
              "[train] and [data] are configs/vgg16.cfg's.\n"
              "[data] expects a PNG folder (train/<class>/*.png, test/<class>/*.png) of 224x224 images.\n"
              "Written by tools/gen_configs.py; edit that, not this."
              % (depth, depth - 16, extra, "/".join(str(n) for n in convs), "{:,}".format(vgg_params(depth))))
    c.blank()
    header(c, 64, 3, 224, dict(epochs=74, learning_rate=0.01, momentum=0.9, weight_decay=0.0005,
                               lr_schedule="cosine", seed=1), IMAGENET_DATA)
    for s, ((width, _), n) in enumerate(zip(VGG_STAGES, convs)):
        c.comment("stage %d: %d convolutions of %d filters" % (s + 1, n, width))
        for _ in range(n):
            conv(c, width, 3, bias=None)
            c.section("relu")
        c.section("maxpool", size=2)
        c.blank()
    for output in (4096, 4096):
        c.section("connected", output=output)
        c.section("relu")
        c.section("dropout", probability=0.5)
    c.section("connected", output=1000)
    c.section("softmax")
    return c.text()


def vgg_params(depth):
    """Weights and biases of vgg_deep(depth), from the layer sizes."""
    extra = (depth - 16) // len(VGG_STAGES)
    total, channels = 0, 3
    for width, n in VGG_STAGES:
        for _ in range(n + extra):
            total += 9 * channels * width + width
            channels = width
    for fan_in, output in ((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000)):
        total += fan_in * output + output
    return total


CONFIGS = {
    "resnet20.cfg": lambda: resnet_cifar(20),
    "resnet56.cfg": lambda: resnet_cifar(56),
    "resnet110.cfg": lambda: resnet_cifar(110),
    "resnet1202.cfg": lambda: resnet_cifar(1202),
    "resnet50.cfg": resnet50,
    "googlenet.cfg": googlenet,
    "densenet40.cfg": densenet,
    "resnet-fmnist.cfg": resnet_fmnist,
    "vgg116.cfg": lambda: vgg_deep(116),
    "vgg216.cfg": lambda: vgg_deep(216),
    "vgg316.cfg": lambda: vgg_deep(316),
    "vgg416.cfg": lambda: vgg_deep(416),
}


def main(argv):
    check = "--check" in argv[1:]
    stale = []
    for name, make in CONFIGS.items():
        path = os.path.join(ROOT, "configs", name)
        text = make()
        if check:
            try:
                with open(path) as f:
                    if f.read() == text:
                        continue
            except OSError:
                pass
            stale.append(name)
        else:
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print("gen_configs: differs from what tools/gen_configs.py writes: %s (run it, and commit)" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
