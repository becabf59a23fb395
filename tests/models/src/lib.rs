//! `#[model]` structs declared in a crate of their own, so the suite can check that a model
//! nests from another crate (tests/nn/macro_modules.rs, tests/ui/*/nested_from_another_crate.rs).

use rumus::prelude::*;

/// Models in a module, re-exported at the crate root.
pub mod vision {
    use rumus::prelude::*;

    /// `[1, 8, 8]` → `[18]` features.
    #[model(input = [1, 8, 8])]
    pub struct Backbone {
        /// One convolution, pooled and flattened.
        pub conv: layers![Conv2d(2, kernel = 3), Relu, MaxPool2d(2), Flatten],
    }
}

pub use vision::Backbone;

/// `[16]` token indices → `[16, 4]`.
#[model(input = [16])]
pub struct TokenEmbedder {
    /// The embedding table.
    pub embed: layers![Embedding(50, 4)],
}

/// ResNet-18 for CIFAR-sized images (He et al., 2016, in the CIFAR form of Kuang Liu's
/// `pytorch-cifar`): a 3×3 stem of 64 channels without max-pool, four stages of two
/// `BasicBlock`s (64, 128, 256, 512 channels; stages 2 to 4 halve the size with a stride-2 first
/// block whose shortcut is a 1×1 convolution and batch norm), global average pooling and a
/// linear layer to 10 classes: 11,173,962 parameters. Its PyTorch twin, with the same
/// `state_dict` names, is `ResNet18` in `tools/bench/torch_bench.py`.
///
/// A block is `Residual(conv, bn, relu, conv, bn), Relu` inside a stage's layer list; a
/// downsampling block gives its `Residual` a projection shortcut,
/// `shortcut = (Conv2d(out, 1, stride = 2, bias = false), BatchNorm2d)`.
pub mod resnet {
    use rumus::prelude::*;

    /// ResNet-18 on `[3, 32, 32]` images, 10 classes (see the module's documentation).
    #[model(input = [3, 32, 32])]
    pub struct ResNet18 {
        /// conv3×3 64, batch norm, ReLU.
        pub stem: layers![Conv2d(64, 3, padding = 1, bias = false), BatchNorm2d, Relu],
        /// Two identity blocks of 64 channels at 32×32.
        pub layer1: layers![Repeat(
            2,
            Residual(
                Conv2d(64, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(64, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        )],
        /// A downsampling block to 128 channels at 16×16, then an identity block.
        pub layer2: layers![
            Residual(
                Conv2d(128, 3, stride = 2, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(128, 3, padding = 1, bias = false),
                BatchNorm2d,
                shortcut = (Conv2d(128, 1, stride = 2, bias = false), BatchNorm2d)
            ),
            Relu,
            Residual(
                Conv2d(128, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(128, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        ],
        /// A downsampling block to 256 channels at 8×8, then an identity block.
        pub layer3: layers![
            Residual(
                Conv2d(256, 3, stride = 2, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(256, 3, padding = 1, bias = false),
                BatchNorm2d,
                shortcut = (Conv2d(256, 1, stride = 2, bias = false), BatchNorm2d)
            ),
            Relu,
            Residual(
                Conv2d(256, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(256, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        ],
        /// A downsampling block to 512 channels at 4×4, then an identity block.
        pub layer4: layers![
            Residual(
                Conv2d(512, 3, stride = 2, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(512, 3, padding = 1, bias = false),
                BatchNorm2d,
                shortcut = (Conv2d(512, 1, stride = 2, bias = false), BatchNorm2d)
            ),
            Relu,
            Residual(
                Conv2d(512, 3, padding = 1, bias = false),
                BatchNorm2d,
                Relu,
                Conv2d(512, 3, padding = 1, bias = false),
                BatchNorm2d
            ),
            Relu
        ],
        /// Global average pooling and the classifier.
        pub head: layers![GlobalAvgPool, Linear(10)],
    }
}

pub use resnet::ResNet18;
