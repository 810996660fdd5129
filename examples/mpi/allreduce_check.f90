! allreduce_check.f90 - a plain Fortran MPI program (it knows nothing of inagg) that checks
! MPI_ALLREDUCE and MPI_IALLREDUCE on MPI_INTEGER and MPI_REAL, with and without MPI_IN_PLACE,
! on MPI_COMM_WORLD and a duplicate, plus a MAX and a DOUBLE PRECISION sum that MPI keeps.
!     mpifort -O2 allreduce_check.f90 -o allreduce_check_f
!     mpirun -n 4 ./allreduce_check_f            (prints "N passed, M failed")
program allreduce_check
  use mpi
  implicit none
  integer, parameter :: n = 50000
  integer :: ierr, rank, nranks, dup, req, i, r, passed, failed, mx
  integer, allocatable :: a(:), b(:)
  real, allocatable :: x(:), y(:)
  double precision :: d, ds
  logical :: ok

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  passed = 0
  failed = 0
  allocate(a(n), b(n), x(n), y(n))

  call fill()
  call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report(ierr == MPI_SUCCESS .and. int_ok(b), 'integer sum')
  call MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report(ierr == MPI_SUCCESS .and. int_ok(a), 'integer sum in place')
  call MPI_Allreduce(x, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report(ierr == MPI_SUCCESS .and. real_ok(y), 'real sum')
  call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report(ierr == MPI_SUCCESS .and. real_ok(x), 'real sum in place')

  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call fill()
  call MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_INTEGER, MPI_SUM, dup, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call report(ierr == MPI_SUCCESS .and. int_ok(a), 'dup: iallreduce integer + wait')
  call MPI_Allreduce(x, y, n, MPI_REAL, MPI_SUM, dup, ierr)
  call report(ierr == MPI_SUCCESS .and. real_ok(y), 'dup: real sum')
  call MPI_Comm_free(dup, ierr)

  mx = rank
  call MPI_Allreduce(MPI_IN_PLACE, mx, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  call report(mx == nranks - 1, 'integer max')
  d = 0.5d0
  call MPI_Allreduce(d, ds, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call report(ds == 0.5d0 * nranks, 'double precision sum')

  if (rank == 0) print '(i0, a, i0, a)', passed, ' passed, ', failed, ' failed'
  call MPI_Finalize(ierr)
  if (failed > 0) stop 1

contains

  subroutine fill()
    do i = 1, n
      a(i) = mod(i * 7 + rank * 13, 1000) - 500
      x(i) = real(mod(i * 3 + rank, 256)) * 0.25
    end do
  end subroutine fill

  logical function int_ok(v)
    integer, intent(in) :: v(:)
    integer :: want
    int_ok = .true.
    do i = 1, n
      want = 0
      do r = 0, nranks - 1
        want = want + mod(i * 7 + r * 13, 1000) - 500
      end do
      if (v(i) /= want) int_ok = .false.
    end do
  end function int_ok

  logical function real_ok(v)
    real, intent(in) :: v(:)
    real :: want
    real_ok = .true.
    do i = 1, n
      want = 0.0
      do r = 0, nranks - 1
        want = want + real(mod(i * 3 + r, 256)) * 0.25
      end do
      if (v(i) /= want) real_ok = .false.
    end do
  end function real_ok

  subroutine report(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    logical :: all
    call MPI_Allreduce(cond, all, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
    if (all) then
      passed = passed + 1
    else
      failed = failed + 1
      if (rank == 0) print '(2a)', 'FAIL ', what
    end if
  end subroutine report
end program allreduce_check
