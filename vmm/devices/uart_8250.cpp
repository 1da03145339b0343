#include "vmm/devices/uart_8250.h"

namespace lockvisor::devices {
namespace {
// Register offsets and bits (PC16550D datasheet).
constexpr std::uint8_t kRbrThr = 0, kIer = 1, kIirFcr = 2, kLcr = 3, kMcr = 4, kLsr = 5, kMsr = 6, kScr = 7;
constexpr std::uint8_t kIerThri = 0x02;
constexpr std::uint8_t kIirNoInt = 0x01, kIirThri = 0x02, kIirFifo = 0xC0;
constexpr std::uint8_t kLcrDlab = 0x80;
constexpr std::uint8_t kMcrLoop = 0x10;
constexpr std::uint8_t kLsrThre = 0x20, kLsrTemt = 0x40;
constexpr std::uint8_t kMsrCts = 0x10, kMsrDsr = 0x20, kMsrDcd = 0x80;
}  // namespace

Uart8250::Uart8250(std::uint16_t base, Sink sink, IrqLine irq)
    : base_(base), sink_(std::move(sink)), irq_(std::move(irq)) {}

void Uart8250::update_irq() {
  const bool level = (ier_ & kIerThri) != 0 && thre_pending_;
  if (level == line_) return;
  line_ = level;
  if (irq_) irq_(level);
}

std::uint8_t Uart8250::read(std::uint8_t offset) {
  std::lock_guard lock(mutex_);
  const bool dlab = (lcr_ & kLcrDlab) != 0;
  switch (offset) {
    case kRbrThr:
      return dlab ? dll_ : 0;  // nothing is ever received
    case kIer:
      return dlab ? dlm_ : ier_;
    case kIirFcr: {
      const std::uint8_t fifo = fifo_ ? kIirFifo : 0;
      if ((ier_ & kIerThri) != 0 && thre_pending_) {
        thre_pending_ = false;  // reading IIR acknowledges THR empty
        update_irq();
        return fifo | kIirThri;
      }
      return fifo | kIirNoInt;
    }
    case kLcr:
      return lcr_;
    case kMcr:
      return mcr_;
    case kLsr:
      return kLsrThre | kLsrTemt;
    case kMsr:
      if ((mcr_ & kMcrLoop) != 0)  // DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD
        return static_cast<std::uint8_t>(((mcr_ & 0x01) << 5) | ((mcr_ & 0x02) << 3) | ((mcr_ & 0x04) << 4) |
                                         ((mcr_ & 0x08) << 4));
      return kMsrCts | kMsrDsr | kMsrDcd;
    case kScr:
      return scr_;
    default:
      return 0xFF;
  }
}

bool Uart8250::write(VcpuContext& vcpu, std::uint8_t offset, std::uint8_t value) {
  std::unique_lock lock(mutex_);
  const bool dlab = (lcr_ & kLcrDlab) != 0;
  switch (offset) {
    case kRbrThr:
      if (dlab) {
        dll_ = value;
        return true;
      }
      thre_pending_ = true;  // sent at once: the transmitter is empty again
      update_irq();
      if ((mcr_ & kMcrLoop) != 0) return true;  // loopback: nothing leaves the UART
      lock.unlock();  // the sink may block on a file; other vCPUs keep their registers
      return sink_(vcpu, value);
    case kIer:
      if (dlab) {
        dlm_ = value;
      } else {
        const bool enabling = (value & kIerThri) != 0 && (ier_ & kIerThri) == 0;
        ier_ = value & 0x0F;
        if (enabling) thre_pending_ = true;  // THRE re-asserts when its interrupt is enabled
        update_irq();
      }
      return true;
    case kIirFcr:
      fifo_ = (value & 0x01) != 0;
      return true;
    case kLcr:
      lcr_ = value;
      return true;
    case kMcr:
      mcr_ = value & 0x1F;
      return true;
    case kScr:
      scr_ = value;
      return true;
    default:  // LSR and MSR are read-only
      return true;
  }
}

bool Uart8250::on_io(VcpuContext& vcpu, const kvm::VcpuExit::PortIo& io) {
  // Byte-wide registers: a wider access touches consecutive registers, as a
  // real 8-bit bus would split it.
  for (std::uint32_t i = 0; i < io.count; ++i) {
    for (std::uint8_t b = 0; b < io.size; ++b) {
      const std::uint32_t at = std::uint32_t{io.port} - base_ + b;
      std::uint8_t& byte = io.data[std::size_t{i} * io.size + b];
      if (at >= kPorts) {
        if (!io.write) byte = 0xFF;
        continue;
      }
      if (!io.write) {
        byte = read(static_cast<std::uint8_t>(at));
      } else if (!write(vcpu, static_cast<std::uint8_t>(at), byte)) {
        return false;  // the sink ended the run
      }
    }
  }
  return true;
}

}  // namespace lockvisor::devices
