// A 16550A-compatible UART (the PC's COM1 at ports 0x3F8-0x3FF, IRQ 4), as
// much of it as a Linux guest's 8250 driver uses for a console.
//
// Transmission is instantaneous: a byte written to THR goes to the sink at
// once, so the transmitter is always empty (LSR reads THRE | TEMT) and
// nothing is ever received (no input is connected: DR stays clear). What the
// driver needs from the model:
//   - the scratch and IER registers read back what was written (its probe);
//   - FCR bit 0 turns the FIFO bits of IIR on (bits 7:6 = 11: a 16550A);
//   - a THR-empty interrupt whenever IER.ETBEI is set and the transmitter is
//     empty: raised when ETBEI is set or a byte is written, cleared by a read
//     of IIR that reports it or by clearing ETBEI (the driver's "does THRE
//     re-assert?" start-up test depends on exactly this);
//   - loopback (MCR bit 4) reflects MCR's outputs in MSR's inputs.
// The interrupt is a level on IRQ 4 (`irq`, called with the new level only
// when it changes). All registers are behind one mutex: several vCPUs may
// write the console at once.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>

#include "vmm/devices/io_bus.h"

namespace lockvisor::devices {

class Uart8250 final : public PortDevice {
 public:
  static constexpr std::uint16_t kCom1Base = 0x3F8;
  static constexpr std::uint32_t kPorts = 8;
  static constexpr unsigned kCom1Irq = 4;

  // `sink` takes each transmitted byte, on the thread of the vCPU that
  // wrote it; it returns false after ending the run through `vcpu` (a
  // budget or a write that failed). `irq` drives the interrupt line.
  using Sink = std::function<bool(VcpuContext& vcpu, std::uint8_t byte)>;
  using IrqLine = std::function<void(bool level)>;
  Uart8250(std::uint16_t base, Sink sink, IrqLine irq);

  bool on_io(VcpuContext& vcpu, const kvm::VcpuExit::PortIo& io) override;

  // One register access (offset 0-7); what on_io does per byte. Returns
  // false when the sink refused a byte.
  std::uint8_t read(std::uint8_t offset);
  bool write(VcpuContext& vcpu, std::uint8_t offset, std::uint8_t value);

 private:
  void update_irq();  // with mutex_ held

  std::uint16_t base_;
  Sink sink_;
  IrqLine irq_;
  std::mutex mutex_;
  std::uint8_t ier_ = 0, lcr_ = 0, mcr_ = 0, scr_ = 0, dll_ = 0x0C, dlm_ = 0;
  bool fifo_ = false;
  bool thre_pending_ = false;  // THR-empty interrupt waiting to be read from IIR
  bool line_ = false;          // the IRQ level last driven
};

}  // namespace lockvisor::devices
