// Parameter initialisers, as torch.nn.init: in place (a Tensor is a handle: the one passed shares
// the parameter's storage, as c->weight() does; the same handle is returned), outside autograd,
// on any device, drawing
// from the default generator (manual_seed) or the one given. Fans follow PyTorch: fan_in =
// size(1) * receptive field, fan_out = size(0) * receptive field (a 1-d tensor: its size both).
//   net->apply([](Module& m) {
//     if (auto* c = dynamic_cast<Conv2d*>(&m)) init::kaiming_normal_(c->weight(), 0, init::FanMode::fan_out);
//   });
// kiln's own layers initialise as PyTorch's do (Conv2d and Linear: kaiming_uniform_(a = sqrt(5))
// and a bias bound of 1 / sqrt(fan_in)), through these functions.
#pragma once

#include <cstdint>
#include <utility>

#include "engine/random.h"
#include "engine/tensor.h"

namespace kiln::init {

enum class FanMode : uint8_t { fan_in, fan_out };
enum class Nonlinearity : uint8_t { linear, conv, sigmoid, tanh, relu, leaky_relu, selu };

// torch.nn.init.calculate_gain; `param` is leaky_relu's negative slope.
double calculate_gain(Nonlinearity nl, double param = 0.01);
// {fan_in, fan_out}; kiln::Error for a tensor of fewer than 1 dim.
std::pair<int64_t, int64_t> fans(const Tensor& t);

Tensor uniform_(Tensor t, double a = 0, double b = 1, Generator* gen = nullptr);
Tensor normal_(Tensor t, double mean = 0, double std = 1, Generator* gen = nullptr);
// N(mean, std) restricted to [a, b] (torch.nn.init.trunc_normal_): draws outside are redrawn.
// kiln::Error where [a, b] holds less than 1e-6 of the distribution's mass.
Tensor trunc_normal_(Tensor t, double mean = 0, double std = 1, double a = -2, double b = 2,
                     Generator* gen = nullptr);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
// U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nl, a).
Tensor kaiming_uniform_(Tensor t, double a = 0, FanMode mode = FanMode::fan_in,
                         Nonlinearity nl = Nonlinearity::leaky_relu, Generator* gen = nullptr);
// N(0, std) with std = gain / sqrt(fan).
Tensor kaiming_normal_(Tensor t, double a = 0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nl = Nonlinearity::leaky_relu, Generator* gen = nullptr);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)); normal: std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, double gain = 1, Generator* gen = nullptr);
Tensor xavier_normal_(Tensor t, double gain = 1, Generator* gen = nullptr);

}  // namespace kiln::init
