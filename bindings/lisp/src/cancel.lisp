;;;; cancel.lisp - cancelling long calls (knn_set_cancel_flag).
;;;;
;;;;   (let ((flag (knn:make-cancel-flag)))
;;;;     (knn:with-cancel-flag (flag)          ; registered for this thread
;;;;       ...long calls; another thread may (knn:cancel flag)...))
;;;;
;;;; A cancelled call signals KNN-CANCELLED; RESET-CANCEL-FLAG before reusing it.
;;;; The flag is a foreign int owned by the CANCEL-FLAG object.

(in-package #:knn-gpgpu)

(defstruct (cancel-flag (:constructor %make-cancel-flag (pointer)))
  "A C int the library polls while it is registered (SET-CANCEL-FLAG)."
  (pointer nil))

(defun make-cancel-flag ()
  "A new, clear cancellation flag (freed by FREE-CANCEL-FLAG or the garbage collector)."
  (let* ((pointer (cffi:foreign-alloc :int :initial-element 0))
         (flag (%make-cancel-flag pointer)))
    #+sbcl (sb-ext:finalize flag (lambda () (cffi:foreign-free pointer)) :dont-save t)
    flag))

(defun live-flag (flag)
  (check-type flag cancel-flag)
  (or (cancel-flag-pointer flag) (usage-error "the cancel flag is freed")))

(defun cancel (flag)
  "Set FLAG: calls that poll it stop with KNN-CANCELLED. Any thread may call it."
  (setf (cffi:mem-ref (live-flag flag) :int) 1)
  flag)

(defun reset-cancel-flag (flag)
  (setf (cffi:mem-ref (live-flag flag) :int) 0)
  flag)

(defun cancelled-p (flag) (/= 0 (cffi:mem-ref (live-flag flag) :int)))

(defun set-cancel-flag (flag)
  "Register FLAG for the calling thread (NIL unregisters)."
  (check-status "knn_set_cancel_flag"
                (%set-cancel-flag (if flag (live-flag flag) (cffi:null-pointer))))
  (values))

(defun free-cancel-flag (flag)
  "Free FLAG's foreign int (it must not be registered on any thread)."
  (check-type flag cancel-flag)
  (let ((pointer (cancel-flag-pointer flag)))
    (when pointer
      (setf (cancel-flag-pointer flag) nil)
      #+sbcl (sb-ext:cancel-finalization flag)
      (cffi:foreign-free pointer)))
  (values))

(defmacro with-cancel-flag ((flag) &body body)
  "Run BODY with FLAG registered for this thread; unregistered afterwards."
  (let ((f (gensym "FLAG")))
    `(let ((,f ,flag))
       (set-cancel-flag ,f)
       (unwind-protect (progn ,@body)
         (set-cancel-flag nil)))))
